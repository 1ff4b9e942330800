// @switchyard/sdk/testkit: fake fleets and requests in a line each, a
// strategy context with a seeded random source and a clock the test moves,
// and the conformance suite every strategy, built-in or not, must pass.
export {
  candidate,
  context,
  fleet,
  kvIndex,
  request,
  type CandidateInit,
  type ContextInit,
  type LogLine,
  type TestRequest,
  type TestContext,
  type TestKvHolding,
} from './fixtures.ts';
export {
  assertConformance,
  expectPick,
  measurePickTime,
  resolveConfig,
  runConformance,
  type ConformanceCheck,
  type ConformanceFailure,
  type ConformanceOptions,
  type PickTiming,
} from './conformance.ts';
