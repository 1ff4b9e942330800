// A process of its own that sends a normal keyed chat every 100 ms to
// argv[2] from argv[3] (so that a flood sent by its parent does not slow the
// measurer's loop): says 'ready', then on each { ends } message measures until
// then (ms since the epoch) and sends back the latencies (failures as null).
import { normalTraffic } from './floods-kit.ts';

const [url, from] = process.argv.slice(2);
process.on('message', (message: { ends: number }) => {
  void normalTraffic(url!, () => Date.now() > message.ends, from).then((latencies) => process.send?.(latencies.map((l) => (l === Infinity ? null : l))));
});
process.send?.('ready');
