/**
 * A pass run at start and then every interval, one at a time (the next is timed from the
 * end of the last), stopped before the database closes: the retention sweeps' loop.
 * The pass handles its own errors; a throw is only logged by the caller's pass.
 */
export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly pass: () => Promise<void>,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    const tick = () => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
        if (this.timer) this.timer = setTimeout(tick, this.intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  /** No pass starts after this; one under way is awaited. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
