// Shared by the scenario scripts: the client from the environment, and the
// one JSON line each script prints for server/npm_test.go to assert on.
import { File } from 'node:buffer';
import OpenAI from 'openai';

// The openai package declares node >= 22; its uploads need a global File,
// which node 18 (Debian 12's nodejs) lacks: it names node:buffer's as the
// fix. The scripts are tested under node 20.
if (typeof globalThis.File === 'undefined') globalThis.File = File;
if (Number(process.versions.node.split('.')[0]) < 18) {
  console.error(`node ${process.versions.node} is too old for the openai npm client: 18 or later is needed`);
  process.exit(2);
}

// need returns the environment variable name, or exits naming it.
export function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
}

// client is the official client pointed at the gateway at BATCHAGENT_URL
// (its /v1/ base) with key BATCHAGENT_KEY, without retries.
export function client() {
  return new OpenAI({ baseURL: need('BATCHAGENT_URL'), apiKey: need('BATCHAGENT_KEY'), maxRetries: 0, timeout: 30_000 });
}

// print writes v as one JSON line on stdout.
export function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

// run runs main; an error it throws is printed as JSON (status, param,
// code, message) and the script exits 1.
export function run(main) {
  main().catch((err) => {
    print({ error: { name: err?.constructor?.name, status: err?.status, param: err?.param, code: err?.code, message: String(err?.message ?? err) } });
    process.exit(1);
  });
}
