// endpoints.mjs: the endpoints beyond chat completions, with model MODEL:
// models.retrieve (MODEL and a missing one), embeddings.create (the
// client's default base64 encoding, and floats with dimensions 8),
// completions.create (plain and streamed), responses.create (plain, and
// streamed with the function tool get_weather), chat.completions.create
// with n: 2 (plain and streamed). Prints what each gave.
import { client, need, print, run } from './lib.mjs';

run(async () => {
  const c = client();
  const model = need('MODEL');
  const out = {};

  out.model = await c.models.retrieve(model);
  try {
    await c.models.retrieve('no-such-model');
    out.missing = { status: 200 };
  } catch (err) {
    out.missing = { status: err.status, code: err.code, param: err.param };
  }

  const e64 = await c.embeddings.create({ model, input: ['first text', 'second text'] });
  out.embeddings = { object: e64.object, n: e64.data.length, dims: e64.data.map((d) => d.embedding.length), first: e64.data[0].embedding.slice(0, 3), usage: e64.usage };
  const ef = await c.embeddings.create({ model, input: 'first text', dimensions: 8, encoding_format: 'float' });
  out.embeddings8 = { dims: ef.data[0].embedding.length, first: ef.data[0].embedding.slice(0, 3) };

  const cp = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 16 });
  out.completion = { object: cp.object, text: cp.choices[0].text, finish: cp.choices[0].finish_reason, usage: cp.usage };
  const cs = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 16, stream: true });
  let streamed = '';
  for await (const ch of cs) for (const choice of ch.choices) streamed += choice.text ?? '';
  out.completionStream = streamed;

  const rp = await c.responses.create({ model, instructions: 'Be brief.', input: 'Say hello.', max_output_tokens: 64 });
  out.response = { object: rp.object, status: rp.status, text: rp.output_text, types: rp.output.map((o) => o.type), usage: rp.usage };

  const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }, strict: true }];
  const rs = await c.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] }], tools, stream: true });
  const events = [];
  let args = '';
  let completed = null;
  for await (const ev of rs) {
    events.push(ev.type);
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.completed') completed = ev.response;
  }
  const call = completed?.output.find((o) => o.type === 'function_call');
  out.responseStream = { events: [...new Set(events)], first: events[0], last: events.at(-1), args, call, status: completed?.status };

  // The tool's answer, sent back as a function_call_output.
  const rt = await c.responses.create({ model, input: [
    { role: 'user', content: 'Weather in Paris?' },
    { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":21}' },
  ], tools });
  out.afterTool = { status: rt.status, types: rt.output.map((o) => o.type), text: rt.output_text };

  // n: 2 choices, plain and streamed (each chunk with its choice's index).
  const cn = await c.chat.completions.create({ model, n: 2, messages: [{ role: 'user', content: 'Say hi.' }] });
  out.chatN = { indexes: cn.choices.map((ch) => ch.index), texts: cn.choices.map((ch) => ch.message.content ?? ''), finish: cn.choices.map((ch) => ch.finish_reason) };
  const sn = await c.chat.completions.create({ model, n: 2, stream: true, messages: [{ role: 'user', content: 'Say hi.' }] });
  const texts = [];
  for await (const ch of sn) for (const choice of ch.choices) texts[choice.index] = (texts[choice.index] ?? '') + (choice.delta.content ?? '');
  out.chatNStream = { texts };
  print(out);
});
