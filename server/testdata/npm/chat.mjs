// chat.mjs: one chat completion with a text part and an image_url part
// holding the data: URL in the file IMAGE_FILE, to MODEL at detail DETAIL
// ("" for none), then the same streamed with usage. Prints
// {content, usage, stream: {content, usage, chunks}}.
import { readFileSync } from 'node:fs';
import { client, need, print, run } from './lib.mjs';

run(async () => {
  const c = client();
  const url = readFileSync(need('IMAGE_FILE'), 'utf8');
  const image = { url };
  if (process.env.DETAIL) image.detail = process.env.DETAIL;
  const params = {
    model: need('MODEL'),
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Classify this photo.' }, { type: 'image_url', image_url: image }] }],
  };
  const resp = await c.chat.completions.create(params);

  const stream = await c.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let content = '';
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices?.[0]?.delta?.content) content += chunk.choices[0].delta.content;
    if (chunk.usage) usage = chunk.usage;
  }
  print({ model: resp.model, content: resp.choices[0].message.content, finish: resp.choices[0].finish_reason, usage: resp.usage, stream: { content, usage, chunks } });
});
