// Shared by the scenario scripts: the client from the environment, and the
// one JSON line each script prints for server/npm_test.go to assert on.
import OpenAI from 'openai';

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
