/** The one undo stack of a start: a failed start and `shutdown()` both unwind it. */
/** Undo steps in the reverse order of what they undo; each runs once, failures do not stop the rest. */
export class Teardown {
  private readonly steps: (() => unknown)[] = [];

  push(step: () => unknown): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
      await Promise.allSettled([Promise.resolve().then(step)]);
    }
  }
}
