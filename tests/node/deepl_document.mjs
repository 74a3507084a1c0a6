// Translate a document with the npm "deepl-node" client, unchanged, against the URL given: prints JSON.
import * as deepl from "deepl-node";

const [serverUrl, authKey, input, output] = process.argv.slice(2);
const translator = new deepl.Translator(authKey, { serverUrl });
const status = await translator.translateDocument(input, output, null, "zh-HANS");
console.log(JSON.stringify({ status: status.status, billedCharacters: status.billedCharacters ?? null }));
