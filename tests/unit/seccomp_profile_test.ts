import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import process from "node:process";
import {
  DENIED_SYSCALLS,
  SECCOMP_PROFILE,
  SeccompProfileError,
  seccompProfilePath,
  type SeccompRule,
} from "../../plugins/runtime/seccomp.ts";

const profile = JSON.parse(SECCOMP_PROFILE) as {
  defaultAction: string;
  defaultErrnoRet: number;
  archMap: { architecture: string; subArchitectures: string[] }[];
  syscalls: SeccompRule[];
};
const rules = profile.syscalls;
const allowedAlways = new Set(
  rules.filter((r) => r.action === "SCMP_ACT_ALLOW" && !r.args).flatMap((r) => r.names),
);
const CLONE_NEW = {
  NS: 0x20000,
  CGROUP: 0x02000000,
  UTS: 0x04000000,
  IPC: 0x08000000,
  USER: 0x10000000,
  PID: 0x20000000,
  NET: 0x40000000,
};

function withDir(fn: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "codemode-seccomp-test-"));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

Deno.test("the profile is an allowlist: anything it does not name fails with ENOSYS", () => {
  assert.equal(profile.defaultAction, "SCMP_ACT_ERRNO");
  assert.equal(profile.defaultErrnoRet, 38);
  for (const rule of rules) {
    assert.ok(["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO"].includes(rule.action), rule.comment);
    if (rule.action === "SCMP_ACT_ERRNO") assert.ok(rule.errnoRet, `${rule.comment} names its errno`);
  }
});

Deno.test("the profile admits the native x86_64 and aarch64 syscall tables only, no 32-bit ones", () => {
  assert.deepEqual(profile.archMap, [
    { architecture: "SCMP_ARCH_X86_64", subArchitectures: [] },
    { architecture: "SCMP_ARCH_AARCH64", subArchitectures: [] },
  ]);
});

Deno.test("the profile refuses the kernel interfaces the engines' defaults leave open", () => {
  for (
    const name of [
      "unshare",
      "setns",
      "mount",
      "open_tree",
      "io_uring_setup",
      "io_uring_enter",
      "keyctl",
      "add_key",
      "request_key",
      "bpf",
      "perf_event_open",
      "userfaultfd",
      "ptrace",
      "process_vm_readv",
      "process_vm_writev",
      "memfd_secret",
      "modify_ldt",
      "kexec_load",
      "init_module",
      "finit_module",
      "pivot_root",
      "swapon",
      "reboot",
      "acct",
      "name_to_handle_at",
      "open_by_handle_at",
      "fanotify_init",
      "iopl",
      "ioperm",
      "seccomp",
      "sync",
    ]
  ) {
    assert.ok(DENIED_SYSCALLS.includes(name), `${name} is denied`);
    assert.equal(allowedAlways.has(name), false, `${name} is not also allowed`);
  }
  for (const name of ["clone", "clone3", "socket", "socketpair", "personality"]) {
    assert.equal(allowedAlways.has(name), false, `${name} is only allowed with argument checks`);
  }
});

Deno.test("clone is allowed only without namespace flags, each of which is refused; clone3 says ENOSYS", () => {
  const mask = Object.values(CLONE_NEW).reduce((a, b) => a | b, 0);
  const clone = rules.filter((r) => r.names.includes("clone"));
  assert.ok(clone.every((r) => r.names.length === 1 && r.args?.length === 1));
  const allow = clone.filter((r) => r.action === "SCMP_ACT_ALLOW");
  assert.deepEqual(allow.map((r) => r.args), [[{
    index: 0,
    value: mask,
    valueTwo: 0,
    op: "SCMP_CMP_MASKED_EQ",
  }]]);
  for (const [flag, bit] of Object.entries(CLONE_NEW)) {
    const deny = clone.find((r) => r.action === "SCMP_ACT_ERRNO" && r.args?.[0].value === bit);
    assert.deepEqual(
      deny?.args?.[0],
      { index: 0, value: bit, valueTwo: bit, op: "SCMP_CMP_MASKED_EQ" },
      flag,
    );
    assert.equal(deny?.errnoRet, 1, flag);
  }
  const clone3 = rules.filter((r) => r.names.includes("clone3"));
  assert.deepEqual(clone3.map((r) => [r.action, r.errnoRet, r.args]), [["SCMP_ACT_ERRNO", 38, undefined]]);
});

Deno.test("sockets are allowed for unix, inet, inet6 and routing netlink only", () => {
  const allowed = rules.filter((r) => r.action === "SCMP_ACT_ALLOW" && r.names.includes("socket"))
    .map((r) => r.args?.map((a) => [a.index, a.op, a.value]));
  assert.deepEqual(allowed, [
    [[0, "SCMP_CMP_EQ", 1]],
    [[0, "SCMP_CMP_EQ", 2]],
    [[0, "SCMP_CMP_EQ", 10]],
    [[0, "SCMP_CMP_EQ", 16], [2, "SCMP_CMP_EQ", 0]],
  ]);
  const pair = rules.filter((r) => r.names.includes("socketpair")).map((r) => [r.action, r.args?.[0].value]);
  assert.deepEqual(pair, [["SCMP_ACT_ALLOW", 1]]);
});

Deno.test("no syscall is named twice among the unconditional rules", () => {
  const names = rules.filter((r) => !r.args).flatMap((r) => r.names);
  assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), []);
});

Deno.test(
  "seccompProfilePath() writes the built-in profile once, readable by every user, and reuses it",
  withDir(async (dir) => {
    const path = await seccompProfilePath("codemode", dir);
    assert.ok(path);
    assert.equal(readFileSync(path, "utf8"), SECCOMP_PROFILE);
    assert.equal(statSync(path).mode & 0o777, 0o644);
    assert.equal(statSync(join(path, "..")).mode & 0o777, 0o755);
    assert.match(
      relative(dir, path),
      new RegExp(`^codemode-${process.getuid?.() ?? 0}/seccomp-[0-9a-f]{16}\\.json$`),
    );
    rmSync(path); // a temp cleaner removed it
    assert.equal(await seccompProfilePath("codemode", dir), path);
    writeFileSync(path, "{}"); // a damaged copy is rewritten
    assert.equal(await seccompProfilePath("codemode", dir), path);
    assert.equal(readFileSync(path, "utf8"), SECCOMP_PROFILE);
  }),
);

Deno.test(
  "seccompProfilePath() does not trust a directory others can write to",
  withDir(async (dir) => {
    const taken = join(dir, `codemode-${process.getuid?.() ?? 0}`);
    mkdirSync(taken);
    chmodSync(taken, 0o777);
    const path = await seccompProfilePath("codemode", dir);
    assert.ok(path && !path.startsWith(taken + "/"), path);
    assert.equal(readFileSync(path, "utf8"), SECCOMP_PROFILE);
    assert.equal(await seccompProfilePath("codemode", dir), path, "the fallback directory is reused");
  }),
);

Deno.test(
  'seccompProfilePath() leaves the engine\'s default for "engine" and checks a custom profile',
  withDir(async (dir) => {
    assert.equal(await seccompProfilePath("engine", dir), undefined);
    const custom = join(dir, "mine.json");
    writeFileSync(custom, JSON.stringify({ defaultAction: "SCMP_ACT_ERRNO", syscalls: [] }));
    assert.equal(await seccompProfilePath(custom, dir), custom);
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      assert.equal(await seccompProfilePath("mine.json", dir), custom);
    } finally {
      process.chdir(cwd);
    }
    const missing = await seccompProfilePath(join(dir, "missing.json"), dir).catch((error) => error);
    assert.ok(missing instanceof SeccompProfileError);
    assert.deepEqual(missing.problem, {
      message: `Cannot use the seccomp profile "${join(dir, "missing.json")}" (ENOENT)`,
      fix:
        `Set CODEMODE_SECCOMP to a readable JSON profile, "engine" for the engine's default, or unset it ` +
        `for codemode's`,
    });
    assert.match(missing.message, /\(ENOENT\): Set CODEMODE_SECCOMP/);
    writeFileSync(join(dir, "bad.json"), "{nope");
    await assert.rejects(seccompProfilePath(join(dir, "bad.json"), dir), /\(not JSON\)/);
  }),
);
