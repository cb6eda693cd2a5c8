// A work queue that processes jobs one at a time.
export class Queue {
  constructor() { this.jobs = []; this.running = false; }
  push(job) { this.jobs.push(job); this.run(); }
  async run() {
    if (this.running) return;
    this.running = true;
    while (this.jobs.length) {
      const job = this.jobs.shift();
      await job(); // a throwing job stops the queue forever: running stays true
    }
    this.running = false;
  }
}
