// Lets the benchmark ask a target process for its own CPU time over IPC.
export function reportCpuOnRequest(): void {
  process.on('message', (message) => {
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage();
      process.send?.({ cpuMicros: user + system, userMicros: user, systemMicros: system });
    }
  });
}

// Exit cleanly on SIGINT, so profilers (--cpu-prof) get to write their files.
process.on('SIGINT', () => process.exit(0));
