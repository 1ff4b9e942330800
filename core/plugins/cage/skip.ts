// Why a caged strategy gave no answer: the chain goes on without it.
export type CageFault = 'timeout' | 'busy' | 'quarantined' | 'bad_answer';

export class CageSkip extends Error {
  constructor(
    readonly fault: CageFault,
    /** For the decision trace: "skipped: <note>". */
    readonly note: string,
    detail: string,
  ) {
    super(detail);
  }
}
