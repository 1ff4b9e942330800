// Token counts are estimated, not tokenized: a router must decide in
// microseconds, and ~4 characters a token is close enough for pools, limits
// and quotas. Replace the estimator for a better one.

export interface TokenEstimator {
  estimate(text: string): number;
}

export function charsPerTokenEstimator(charsPerToken = 4): TokenEstimator {
  return { estimate: (text) => Math.ceil(text.length / charsPerToken) };
}
