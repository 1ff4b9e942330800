// Runs an async task every interval, one run at a time: the next run is
// scheduled when the last one ends, so a slow replica can never pile up
// overlapping scrapes. stop() clears the timer and aborts a run in progress.

export type PollTask = (signal: AbortSignal) => Promise<void>;

export class PollLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: AbortController | undefined;
  private active = false;

  constructor(
    private readonly task: PollTask,
    private readonly intervalMs: number,
  ) {}

  /** Runs the task now, then every interval. Does nothing when already started. */
  start(): void {
    if (this.active) return;
    this.active = true;
    this.run();
  }

  stop(): void {
    this.active = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.running?.abort(new Error('stopped'));
    this.running = undefined;
  }

  private run(): void {
    this.timer = undefined;
    const controller = new AbortController();
    this.running = controller;
    // Scheduling runs on real time, whatever clock the caller's signals use.
    const startedAt = performance.now();
    // The task reports its own failures; a throw here must not end the loop.
    this.task(controller.signal)
      .catch(() => undefined)
      .finally(() => {
        if (!this.active || this.running !== controller) return;
        this.running = undefined;
        const wait = Math.max(0, this.intervalMs - (performance.now() - startedAt));
        this.timer = setTimeout(() => this.run(), wait);
        // A watcher alone should not keep a process alive; stop() is still the way out.
        this.timer.unref();
      });
  }
}
