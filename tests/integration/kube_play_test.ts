/**
 * The shipped Kubernetes pod spec, run for real where no cluster is: the StatefulSet's pod template of
 * deploy/kubernetes/nodes.yaml (with its PersistentVolumeClaim) under `podman kube play`, with the node
 * image built from deploy/container/Containerfile around the compiled binary. Checked from inside the
 * running pod: its uid, read-only root, no capabilities, no-new-privileges, seccomp, memory and CPU limits,
 * no service-account token, the pod name as node id; and that the node serves a run in the embedded
 * Pyodide runtime under all of that, answering only to the Host the spec names.
 */
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { parseAllDocuments, stringify } from "yaml";
import { ROOT } from "./_serve.ts";
import { TEST_IMAGE } from "./_harness.ts";
import { eventually } from "./_serve_http.ts";

const BINARY = join(ROOT, "dist", "codemode");
const podmanWorks = spawnSync("podman", ["image", "exists", TEST_IMAGE]).status === 0;
const missing = [
  !existsSync(BINARY) && `${BINARY} (bash scripts/compile.sh builds it)`,
  !podmanWorks && `podman with the image ${TEST_IMAGE} (the node image's base here)`,
].filter(Boolean);
if (missing.length) console.warn(`IGNORED kube play suite: missing ${missing.join(", ")}`);

const TOKEN = "kube-token-5d1e0a";
/** The Host the spec's CODEMODE_ALLOWED_HOSTS names. */
const PUBLIC_HOST = "codemode.example.com";

function podman(args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "podman",
      args,
      { env: { ...process.env, ...env }, maxBuffer: 16 << 20 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`podman ${args.join(" ")}: ${stderr || error.message}`)) : resolve(stdout),
    );
  });
}

/** One HTTP exchange with the pod; the body of an event stream is returned whole. */
function exchange(
  address: string,
  options: {
    method?: string;
    path?: string;
    host?: string;
    headers?: Record<string, string>;
    body?: unknown;
  },
): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: address,
      port: 8765,
      path: options.path ?? "/mcp",
      method: options.method ?? "POST",
      headers: {
        host: options.host ?? PUBLIC_HOST,
        accept: "application/json, text/event-stream",
        "content-type": "application/json",
        ...options.headers,
      },
    }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d)).on(
        "end",
        () => resolve({ status: res.statusCode!, text, headers: res.headers }),
      );
    });
    req.on("error", reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

/** The JSON-RPC message of an answer (JSON or a one-message event stream). */
function message(text: string): { result?: Record<string, unknown>; error?: unknown } {
  const data = text.split("\n").find((line) => line.startsWith("data: "));
  return JSON.parse(data ? data.slice(6) : text);
}

Deno.test({
  name:
    "podman kube play of the shipped pod spec: the hardening holds inside, and the node serves a Pyodide run",
  ignore: missing.length > 0,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const t0 = Date.now();
    const tag = randomBytes(3).toString("hex");
    const image = `localhost/codemode-node-test:${tag}`;
    const podName = `codemode-t${tag}-0`; // a StatefulSet pod's name: <set>-<ordinal>
    const claim = `codemode-skills-${tag}`;
    const dir = mkdtempSync(join(tmpdir(), "codemode-kube-"));
    // This machine's hard limit on open files is below podman's default for containers (1048576), which
    // Kubernetes has no field for; podman's configuration for this run lowers the default instead.
    const containersConf = join(dir, "containers.conf");
    writeFileSync(
      containersConf,
      '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n',
    );
    const conf = { CONTAINERS_CONF: containersConf };
    let played: string | undefined;
    try {
      copyFileSync(BINARY, join(dir, "codemode"));
      copyFileSync(join(ROOT, "deploy/container/Containerfile"), join(dir, "Containerfile"));
      // The Containerfile's default base comes from a registry; the sandbox image is Debian 12 as well.
      await podman(["build", "--quiet", "--build-arg", `BASE=${TEST_IMAGE}`, "-t", image, dir]);
      console.log(`  image built: ${((Date.now() - t0) / 1000).toFixed(1)} s`);

      const docs = parseAllDocuments(readFileSync(join(ROOT, "deploy/kubernetes/nodes.yaml"), "utf8"))
        .map((d) => d.toJS());
      const set = docs.find((d) => d.kind === "StatefulSet");
      const pvc = docs.find((d) => d.kind === "PersistentVolumeClaim");
      // podman plays Pods, not StatefulSets: the set's pod template, named as the set names its pods.
      const spec = structuredClone(set.spec.template.spec);
      const container = spec.containers[0];
      container.image = image;
      // The token comes from a Secret in a cluster; here its value is given inline.
      container.env = container.env.map((e: { name: string }) =>
        e.name === "CODEMODE_HTTP_TOKEN" ? { name: e.name, value: TOKEN } : e
      );
      spec.volumes.find((v: { name: string }) => v.name === "skills").persistentVolumeClaim.claimName = claim;
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: podName, ...set.spec.template.metadata },
        spec,
      };
      played = join(dir, "pod.yaml");
      writeFileSync(
        played,
        [{ ...pvc, metadata: { name: claim } }, pod].map((d) => stringify(d)).join("---\n"),
      );
      await podman(["kube", "play", "--quiet", played], conf);
      const ctr = `${podName}-codemode`;
      const infra = (await podman(["pod", "inspect", podName, "--format", "{{.InfraContainerID}}"])).trim();
      const address = (await podman([
        "inspect",
        infra,
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
      ])).trim().split(" ")[0];
      assert.match(address, /^\d+\.\d+\.\d+\.\d+$/, "the pod has an address on podman's network");
      const ready = await eventually(
        async () =>
          (await exchange(address, { method: "GET", path: "/readyz", host: "localhost" }).catch(() =>
            undefined
          ))?.status === 200,
        60_000,
      );
      assert.ok(ready, `the node answers /readyz: ${await podman(["logs", ctr]).catch((e) => e)}`);
      console.log(`  pod serving: ${((Date.now() - t0) / 1000).toFixed(1)} s`);

      // From inside: the process the pod runs, as the spec says.
      const status = await podman(["exec", ctr, "cat", "/proc/1/status"]);
      const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, "m").exec(status)?.[1].trim();
      assert.match(await podman(["exec", ctr, "cat", "/proc/1/cmdline"]), /codemode.serve.--http/);
      assert.equal(field("Uid"), "65532\t65532\t65532\t65532", "runAsUser");
      assert.equal(field("Gid"), "65532\t65532\t65532\t65532", "runAsGroup");
      assert.equal(field("CapEff"), "0000000000000000", "capabilities: drop ALL");
      assert.equal(field("CapPrm"), "0000000000000000");
      assert.equal(field("CapBnd"), "0000000000000000");
      assert.equal(field("NoNewPrivs"), "1", "allowPrivilegeEscalation: false");
      assert.equal(field("Seccomp"), "2", "a seccomp filter (RuntimeDefault)");
      const shell = (script: string) => podman(["exec", ctr, "sh", "-c", script]);
      assert.match(
        await shell("touch /probe 2>&1; echo rc=$?"),
        /Read-only file system\s+rc=1/,
        "readOnlyRootFilesystem",
      );
      assert.match(await shell("touch /var/lib/codemode/probe /skills/probe && echo writable"), /writable/);
      const limits = await shell(
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; " +
          "cat /sys/fs/cgroup/cpu.max 2>/dev/null || " +
          "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)",
      );
      const [memory, quota, period] = limits.trim().split(/\s+/).map(Number);
      assert.equal(memory, 3 * 1024 ** 3, "limits.memory: 3Gi");
      assert.equal(quota / period, 2, "limits.cpu: 2");
      assert.match(
        await shell("ls /var/run/secrets/kubernetes.io 2>&1; echo; echo $CODEMODE_NODE_ID"),
        new RegExp(`No such file[^]*\\n${podName}\\n$`),
      );

      // The node: its id is the pod's name, it answers only to the spec's Host, and runs code in Pyodide.
      const readyz = await exchange(address, { method: "GET", path: "/readyz", host: "localhost" });
      assert.equal(JSON.parse(readyz.text).node, podName);
      const auth = { authorization: `Bearer ${TOKEN}` };
      const init = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "kube-test", version: "1" },
        },
      };
      assert.equal(
        (await exchange(address, { host: address, headers: auth, body: init })).status,
        403,
        "Host: its IP",
      );
      const started = await exchange(address, { headers: auth, body: init });
      assert.equal(started.status, 200, started.text);
      const session = String(started.headers["mcp-session-id"]);
      assert.ok(session.startsWith(`${podName}.`), session);
      const headers = { ...auth, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" };
      await exchange(address, { headers, body: { jsonrpc: "2.0", method: "notifications/initialized" } });
      const run = await exchange(address, {
        headers,
        body: {
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: {
            name: "run_python",
            arguments: { code: "import sys\nf'{sys.platform} {6 * 7}'", timeout: 120 },
          },
        },
      });
      const result = message(run.text).result as {
        structuredContent?: { value?: string };
        content?: unknown;
      };
      assert.equal(result?.structuredContent?.value, "'emscripten 42'", run.text.slice(0, 1000));
      console.log(`  Pyodide run answered: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      if (played) await podman(["kube", "down", played], conf).catch(() => {});
      await podman(["volume", "rm", "-f", claim]).catch(() => {});
      await podman(["rmi", "-f", image]).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  },
});
