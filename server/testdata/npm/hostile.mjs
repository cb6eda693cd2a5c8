// hostile.mjs: sends MODEL an image_url whose url is IMAGE_URL (a data:
// URL that is not base64, say) and prints the error the client raises:
// {error: {name, status, param, code, type, message}}, or {answered} when
// the request was wrongly answered.
import { client, need, print } from './lib.mjs';

const c = client();
try {
  const resp = await c.chat.completions.create({
    model: need('MODEL'),
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Classify this photo.' }, { type: 'image_url', image_url: { url: need('IMAGE_URL') } }] }],
  });
  print({ answered: resp });
} catch (err) {
  print({ error: { name: err.constructor.name, badRequest: err instanceof c.constructor.BadRequestError, status: err.status, param: err.param, code: err.code, type: err.type, message: err.message } });
}
