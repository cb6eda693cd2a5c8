// batch.mjs: uploads the JSONL in INPUT_FILE with files.create, starts a
// batch over it at ENDPOINT (default /v1/chat/completions),
// polls batches.retrieve until it is done (at most
// TIMEOUT_MS, default 20 s), and prints {batch, output, errors}: the
// final batch object and the parsed lines of its output and error files.
import { readFileSync } from 'node:fs';
import { toFile } from 'openai';
import { client, need, print, run } from './lib.mjs';

// lines downloads file id and parses its JSONL.
async function lines(c, id) {
  if (!id) return [];
  const text = await (await c.files.content(id)).text();
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
}

run(async () => {
  const c = client();
  const file = await c.files.create({ file: await toFile(readFileSync(need('INPUT_FILE')), 'images.jsonl'), purpose: 'batch' });
  let batch = await c.batches.create({ input_file_id: file.id, endpoint: process.env.ENDPOINT || '/v1/chat/completions', completion_window: '24h' });
  const deadline = Date.now() + Number(process.env.TIMEOUT_MS || 20_000);
  while (!['completed', 'failed', 'expired', 'cancelled'].includes(batch.status)) {
    if (Date.now() > deadline) throw new Error(`batch ${batch.id} still ${batch.status}`);
    await new Promise((r) => setTimeout(r, 25));
    batch = await c.batches.retrieve(batch.id);
  }
  print({ file, batch, output: await lines(c, batch.output_file_id), errors: await lines(c, batch.error_file_id) });
});
