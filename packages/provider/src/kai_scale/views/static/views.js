// The trend view's charts: each .chart[data-src] loads its JSON and draws itself once it scrolls into
// view (a 90-day page can hold dozens), with Apache ECharts' SVG renderer (crisp, and its marks are
// elements a test can find); a profile's flame graph with d3-flame-graph (SVG too).
"use strict";

const base = document.body.dataset.base;

function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);
}

function runUrl(runId) {
  return `${base}/runs/${encodeURIComponent(runId)}`;
}

function shortTime(timestamp) {
  return timestamp.replace("T", " ").replace("Z", " UTC");
}

function trendOption(trend) {
  const unit = trend.unit;
  const withUnit = (value) => (unit ? `${value} ${unit}` : String(value));
  const points = trend.points.map((point) => ({
    value: [Date.parse(point.timestamp), point.value],
    point,
    itemStyle: point.breach ? {color: "#c62828"} : undefined,
  }));
  const bounds = [
    ["min", trend.bound_min],
    ["max", trend.bound_max],
  ].filter(([, value]) => value !== null);
  const markLines = bounds.map(([name, value]) => ({
    name: `threshold ${name}`,
    yAxis: value,
    text: `threshold: ${name} ${withUnit(value)}`,
    label: {formatter: `${name} ${withUnit(value)}`, position: "insideEndTop"},
    lineStyle: {color: "#ef6c00", type: "dashed"},
  }));
  // A failed run with a value is a red triangle on its point; one without, a red line at its time.
  const failedPoints = trend.failures
    .filter((failure) => failure.value !== null)
    .map((failure) => ({value: [Date.parse(failure.timestamp), failure.value], failure}));
  for (const failure of trend.failures.filter((failure) => failure.value === null)) {
    markLines.push({
      name: "failed",
      xAxis: Date.parse(failure.timestamp),
      text: `${failure.run_id} (${shortTime(failure.timestamp)}): ${failure.text}`,
      label: {formatter: "failed", position: "end"},
      lineStyle: {color: "#c62828", type: "solid", width: 2},
    });
  }
  // An incomplete run without a value (its scenarios did not run: KAI missing or not ready) is no
  // failure: a grey dotted line at its time.
  for (const mark of trend.not_run) {
    markLines.push({
      name: "not run",
      xAxis: Date.parse(mark.timestamp),
      text: `${mark.run_id} (${shortTime(mark.timestamp)}): ${mark.text}`,
      label: {formatter: "not run", position: "end"},
      lineStyle: {color: "#78909c", type: "dotted", width: 2},
    });
  }
  const markPoints = trend.regressions.map((regression) => ({
    name: "regression",
    coord: [Date.parse(regression.timestamp), regression.value],
    text: `${regression.run_id} (${shortTime(regression.timestamp)}): ${regression.text}`,
    value: "regression",
    symbol: "pin",
    symbolSize: 44,
    itemStyle: {color: "#6a1b9a"},
    label: {formatter: "regression", fontSize: 9},
  }));
  return {
    animation: false,
    useUTC: true,
    grid: {left: 72, right: 32, top: 40, bottom: 56},
    tooltip: {
      trigger: "item",
      enterable: true,
      confine: true,
      formatter: (item) => {
        if (item.componentType !== "series") {
          return escapeHtml(item.data.text);
        }
        if (item.data.failure) {
          const failure = item.data.failure;
          return `<strong>run <a href="${runUrl(failure.run_id)}">${escapeHtml(failure.run_id)}</a></strong><br>` +
            `date: ${escapeHtml(shortTime(failure.timestamp))}<br>${escapeHtml(failure.text)}`;
        }
        const point = item.data.point;
        return [
          `<strong>run <a href="${runUrl(point.run_id)}">${escapeHtml(point.run_id)}</a></strong>`,
          `date: ${escapeHtml(shortTime(point.timestamp))}`,
          `${escapeHtml(trend.detail)}: ${escapeHtml(point.shown)}${unit === "s" ? "" : ` ${escapeHtml(unit)}`}`,
          `KAI ref: ${escapeHtml(point.kai_ref ?? "")}`,
          `commit: ${escapeHtml(point.commit ?? "")}`,
          `outcome: ${escapeHtml(point.outcome)}${point.breach ? " (threshold breached)" : ""}`,
        ].join("<br>");
      },
    },
    xAxis: {
      type: "time",
      name: "run date (UTC)",
      nameLocation: "middle",
      nameGap: 32,
      axisLabel: {formatter: "{yyyy}-{MM}-{dd}", hideOverlap: true},
    },
    yAxis: {
      type: "value",
      scale: true,
      name: !unit || trend.detail.endsWith(`(${unit})`) ? trend.detail : `${trend.detail} (${unit})`,
      nameLocation: "middle",
      nameGap: 56,
      // The axis spans the bounds too, so a threshold far from the values is still drawn.
      min: trend.bound_min === null ? undefined : (extent) => Math.min(extent.min, trend.bound_min),
      max: trend.bound_max === null ? undefined : (extent) => Math.max(extent.max, trend.bound_max),
    },
    series: [
      {
        name: trend.detail,
        type: "line",
        data: points,
        symbolSize: 9,
        showAllSymbol: true,
        markLine: {symbol: "none", silent: false, data: markLines},
        markPoint: {data: markPoints},
      },
      {
        name: "failed run",
        type: "scatter",
        data: failedPoints,
        symbol: "triangle",
        symbolSize: 16,
        itemStyle: {color: "#c62828"},
        z: 3,
      },
    ],
  };
}

function metricOption(metric) {
  const window = metric.window || {};
  return {
    animation: false,
    useUTC: true,
    grid: {left: 64, right: 24, top: 24, bottom: metric.series.length > 1 ? 72 : 40},
    tooltip: {trigger: "axis", confine: true},
    legend: metric.series.length > 1 ? {type: "scroll", bottom: 0} : undefined,
    xAxis: {
      type: "time",
      min: window.start ? Date.parse(window.start) : undefined,
      max: window.end ? Date.parse(window.end) : undefined,
    },
    yAxis: {type: "value", scale: true, name: metric.unit, nameLocation: "end"},
    series: metric.series.map((series) => ({
      name: series.label,
      type: "line",
      showSymbol: false,
      data: series.points,
    })),
  };
}

// A value of a profile in its unit: CPU nanoseconds as seconds, bytes in KiB to GiB.
function profileAmount(value, unit) {
  if (unit === "nanoseconds") {
    return `${(value / 1e9).toFixed(2)} s`;
  }
  if (unit === "bytes") {
    const units = ["B", "KiB", "MiB", "GiB"];
    let amount = value;
    let index = 0;
    while (amount >= 1024 && index < units.length - 1) {
      amount /= 1024;
      index += 1;
    }
    return `${amount.toFixed(index ? 1 : 0)} ${units[index]}`;
  }
  return `${value} ${unit}`;
}

function flameWidth(box) {
  return Math.max(box.clientWidth, 320);
}

function drawFlame(box, graph) {
  box.replaceChildren();
  const total = graph.total || 1;
  const width = flameWidth(box);
  const chart = flamegraph.default()
    .width(width)
    .cellHeight(18)
    .transitionDuration(0)
    .minFrameSize(1)
    .label((node) => `${node.data.name}: ${profileAmount(node.value, graph.unit)} ` +
      `(${((100 * node.value) / total).toFixed(1)} % of ${graph.sample_type})`);
  d3.select(box).datum(graph.root).call(chart);
  box.dataset.frames = box.querySelectorAll("svg g").length;
  box.dataset.width = width;
  box.dataset.rendered = "true";
}

function draw(box, data) {
  if (box.dataset.kind === "flame") {
    drawFlame(box, data);
    // d3-flame-graph draws at a fixed width: redrawn at the box's new one once a resize settles.
    let settling;
    window.addEventListener("resize", () => {
      clearTimeout(settling);
      settling = setTimeout(() => {
        if (flameWidth(box) !== Number(box.dataset.width)) {
          try {
            drawFlame(box, data);
          } catch (error) {
            showError(box, error);
          }
        }
      }, 200);
    });
    return;
  }
  box.replaceChildren();
  const chart = echarts.init(box, null, {renderer: "svg"});
  if (box.dataset.kind === "trend") {
    chart.setOption(trendOption(data));
    chart.on("click", (item) => {
      const run = item.componentType === "series" && (item.data.point || item.data.failure);
      if (run) {
        window.location.assign(runUrl(run.run_id));
      }
    });
    box.dataset.points = data.points.length;
    box.dataset.failures = data.failures.length;
    box.dataset.notRun = data.not_run.length;
    box.dataset.regressions = data.regressions.length;
  } else {
    chart.setOption(metricOption(data));
    box.dataset.series = data.series.length;
  }
  window.addEventListener("resize", () => chart.resize());
  box.dataset.rendered = "true";
}

async function load(box) {
  const library = box.dataset.kind === "flame" ? typeof flamegraph : typeof echarts;
  if (library === "undefined") {
    box.querySelector(".chart-status").textContent = "The chart library is missing (make view-assets).";
    return;
  }
  try {
    const response = await fetch(box.dataset.src, {credentials: "same-origin"});
    if (!response.ok) {
      // The view's errors say what is wrong in their detail (a profile that cannot be drawn, ...).
      const detail = await response.json().then((body) => body.detail, () => null);
      // FastAPI's own refusals (a missing parameter) give a list of problems.
      const text = Array.isArray(detail) ? detail.map((problem) => problem.msg).join("; ") : detail;
      throw new Error(text || `${response.status} ${response.statusText}`);
    }
    draw(box, await response.json());
  } catch (error) {
    showError(box, error);
  }
}

function showError(box, error) {
  // A library that failed mid-draw may have replaced the box's status line: a new one says why.
  const status = document.createElement("p");
  status.className = "chart-status";
  status.textContent = `Could not load this chart: ${error.message}`;
  box.replaceChildren(status);
  box.classList.add("chart-error");
  box.dataset.rendered = "error";
}

const inView = new IntersectionObserver(
  (entries, observer) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        load(entry.target);
      }
    }
  },
  {rootMargin: "200px"},
);
document.querySelectorAll(".chart[data-src]").forEach((box) => inView.observe(box));

// Inside Airflow's UI the view is a sandboxed frame that may not navigate the page around it, so a link
// to an Airflow page would open Airflow inside the frame. The frame is same-origin: the link goes to
// Airflow's own router instead, which follows the page's history.
function openInAirflow(event) {
  const link = event.target.closest("a.airflow-link");
  if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || window.top === window) {
    return;
  }
  try {
    window.top.history.pushState(null, "", link.href);
    window.top.dispatchEvent(new PopStateEvent("popstate"));
    event.preventDefault();
  } catch {
    // A frame of another origin: the link opens as any link does.
  }
}
document.addEventListener("click", openInAirflow);
