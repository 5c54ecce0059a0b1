// Starts bin/membership on a free port of 127.0.0.1 and sends it requests.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

// start runs binary with -addr 127.0.0.1:0 and resolves to {base, stop}
// once its log says it listens and is ready.
export function start(binary, timeoutMs) {
  const child = spawn(binary, ["-addr", "127.0.0.1:0", "-log-format", "json"], { stdio: ["ignore", "pipe", "inherit"] });
  // However this process ends (a deadline's exit included), the service ends with it.
  process.on("exit", () => child.kill("SIGKILL"));
  const stop = () => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
  return new Promise((resolve, reject) => {
    let addr = "";
    const timer = setTimeout(() => { stop(); reject(new Error(`${binary} was not ready within ${timeoutMs} ms`)); }, timeoutMs);
    child.once("error", (err) => { clearTimeout(timer); reject(err); });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`${binary} exited with ${code} before it was ready`)); });
    createInterface({ input: child.stdout }).on("line", (line) => {
      let entry;
      try { entry = JSON.parse(line); } catch { return; }
      if (entry.msg === "listening") addr = entry.addr;
      if (entry.msg === "ready" && addr) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        resolve({ base: `http://${addr}/scim/v2`, stop });
      }
    });
  });
}

// client returns send(method, path, body): the status, the headers and the
// body parsed as JSON (null when empty), each request bounded by timeoutMs.
export function client(base, timeoutMs) {
  const send = async function (method, path, body) {
    send.count++;
    const res = await fetch(base + path, {
      method,
      headers: body === undefined ? {} : { "Content-Type": "application/scim+json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json = null;
    if (text !== "") {
      try { json = JSON.parse(text); } catch { json = { unparsable: text }; }
    }
    return { status: res.status, type: res.headers.get("content-type"), json };
  };
  send.count = 0;
  return send;
}
