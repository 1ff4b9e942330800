// A simulation that cannot run as configured: one clear message for the
// user (the CLI prints it without a stack trace and exits 1).

export class SimError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SimError';
  }
}
