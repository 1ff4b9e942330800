// SDK 1.2 made the candidate array a strategy is given shared and frozen
// (sorting it throws). A strategy whose `sdk` range admits an SDK before 1.2
// was written when the array was its own to sort or splice: the SDK's semver
// promise says it keeps working, so it is given a copy (docs/plugins.md,
// "What the SDK's version promises"). A range starting at 1.2 or later opts
// into the shared, frozen array.
import semver from 'semver';

const FROZEN_SINCE = '1.2.0';
const verdicts = new WeakMap<object, boolean>();

/** True when the strategy may have been written for an SDK whose candidate array was its own. */
export function getsOwnCandidates(definition: { readonly sdk: string }): boolean {
  let verdict = verdicts.get(definition);
  if (verdict === undefined) {
    let min: semver.SemVer | null = null;
    try {
      min = semver.minVersion(definition.sdk);
    } catch {
      // Not a range (definitions are checked when loaded): the safe side.
    }
    verdict = min === null || semver.lt(min, FROZEN_SINCE);
    verdicts.set(definition, verdict);
  }
  return verdict;
}
