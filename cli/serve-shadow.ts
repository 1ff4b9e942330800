// `serve --shadow DIR` and `serve --record FILE` (docs/changing-policy.md):
// their settings, and opening them before the router starts. A shadow
// directory that is invalid at start is reported and serve exits 1, like an
// invalid live policy; once running, a broken shadow change is refused and
// the previous shadow kept.
import type { KvIndexView, Logger } from '../sdk/index.ts';
import type { AnyStrategy } from '../core/plugins/registry.ts';
import { TrafficRecorder } from '../core/shadow/recorder.ts';
import { Shadow } from '../core/shadow/shadow.ts';
import { positiveSetting, type Setting, type SettingValues } from './settings.ts';
import { oneLine, UsageError } from './usage.ts';

export const SHADOW_SETTINGS: readonly Setting[] = [
  { flag: 'shadow', arg: 'DIR', env: ['SWITCHYARD_SHADOW'], help: 'a candidate policy decided alongside the live one, never acted on; see /admin/shadow' },
  {
    flag: 'shadow-sample',
    arg: 'R',
    env: ['SWITCHYARD_SHADOW_SAMPLE'],
    default: '1',
    help: 'share of requests the shadow decides, 0..1, at rates up to --shadow-max-per-second',
  },
  {
    flag: 'shadow-max-per-second',
    arg: 'N',
    env: ['SWITCHYARD_SHADOW_MAX_PER_SECOND'],
    default: '200',
    help: 'most shadow decisions a second: above that rate the share falls to N / rate',
  },
  { flag: 'record', arg: 'FILE', env: ['SWITCHYARD_RECORD'], help: 'record every request (facts and outcome, never prompt text) for sim/diff --replay' },
  {
    flag: 'record-max-mb',
    arg: 'N',
    env: ['SWITCHYARD_RECORD_MAX_MB'],
    default: '64',
    help: 'rotate the recording at this size, keeping 3 older files (FILE.1 ...)',
  },
];

export interface ShadowSettings {
  readonly dir?: string;
  readonly share: number;
  readonly maxPerSecond: number;
  readonly record?: string;
  readonly recordMaxBytes: number;
}

/** The settings, checked (a UsageError for a bad value) before anything loads. */
export function shadowSettings(values: SettingValues): ShadowSettings {
  const share = Number(values['shadow-sample']);
  if (!/^\d*\.?\d+$/.test(values['shadow-sample'] ?? '') || !(share >= 0 && share <= 1))
    throw new UsageError(`--shadow-sample must be a number from 0 to 1, not "${values['shadow-sample']}"`);
  const maxPerSecond = positiveSetting('shadow-max-per-second', values['shadow-max-per-second']);
  const maxMb = positiveSetting('record-max-mb', values['record-max-mb']);
  return { dir: values.shadow, share, maxPerSecond, record: values.record, recordMaxBytes: Math.round(maxMb * 1024 * 1024) };
}

export async function openShadowAndRecorder(
  settings: ShadowSettings,
  deps: { builtins: readonly AnyStrategy[]; kvIndex: KvIndexView; log: Logger },
): Promise<{ shadow: Shadow; recorder?: TrafficRecorder } | { error: string[] }> {
  const { share, maxPerSecond } = settings;
  const values = { shadow: settings.dir, record: settings.record };
  // Always made: PUT /admin/shadow can turn it on later.
  const shadow = new Shadow({ builtins: deps.builtins, kvIndex: deps.kvIndex, log: deps.log, sampling: { share, maxPerSecond } });
  if (values.shadow) {
    const set = await shadow.set(values.shadow);
    if (set.result === 'refused')
      return {
        error: [
          ...set.errors,
          `switchyard serve: the shadow policies in ${values.shadow} are invalid; nothing was started (run 'switchyard validate ${values.shadow}')`,
        ],
      };
  }
  if (!values.record) return { shadow };
  try {
    return { shadow, recorder: await TrafficRecorder.open({ file: values.record, maxBytes: settings.recordMaxBytes, log: deps.log }) };
  } catch (error) {
    await shadow.close();
    return { error: [`switchyard serve: cannot record to ${values.record}: ${oneLine(error)}`] };
  }
}
