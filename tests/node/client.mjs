// Translate with the npm "libretranslate" client, unchanged, against the URL given: prints JSON.
import { translate } from "libretranslate";

const [apiurl, apiKey] = process.argv.slice(2);
const one = await translate({ query: "Where is the train station?", source: "en", target: "zh", apiurl, apiKey });
const auto = await translate({ query: "I like green tea.", target: "zh-Hans", apiurl, apiKey });
console.log(JSON.stringify({ one, auto }));
