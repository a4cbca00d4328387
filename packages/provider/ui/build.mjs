// Copies each library's built files and licence into the provider's static files (static/vendor),
// which the trend view's pages load; `make view-assets` and the Airflow image's build run it.
import {copyFileSync, mkdirSync} from "node:fs";

const vendor = "../src/kai_scale/views/static/vendor";
// [file in node_modules, name in vendor]
const files = [
  ["echarts/dist/echarts.min.js", "echarts.min.js"],
  ["echarts/LICENSE", "echarts.LICENSE"],
  ["echarts/NOTICE", "echarts.NOTICE"],
  ["d3/dist/d3.min.js", "d3.min.js"],
  ["d3/LICENSE", "d3.LICENSE"],
  ["d3-flame-graph/dist/d3-flamegraph.umd.min.js", "d3-flamegraph.min.js"],
  ["d3-flame-graph/dist/d3-flamegraph.css", "d3-flamegraph.css"],
  ["d3-flame-graph/LICENSE", "d3-flame-graph.LICENSE"],
];
mkdirSync(vendor, {recursive: true});
for (const [source, name] of files) {
  copyFileSync(`node_modules/${source}`, `${vendor}/${name}`);
}
