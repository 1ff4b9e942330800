// The emulated engine both proxies forward to, fast enough that it is not
// the bottleneck.
import { startEmulator } from '../../sim/emulator/server.ts';
import { reportCpuOnRequest } from './cpu-reporter.ts';

const emulator = await startEmulator({ profile: 'llama-3.1-8b-h100', speed: 50, servedModelName: 'bench-model' });
reportCpuOnRequest();
process.send?.({ url: emulator.url });
