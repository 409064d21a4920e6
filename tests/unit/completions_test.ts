import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Argument, Command, Option } from "commander";
import { commandTree, completions, completionScript } from "../../cli/completions.ts";

function program(): Command {
  const p = new Command("codemode").version("1.0.0", "-V, --version").description("test program");
  p.command("serve").description("Run the server (stdout: it's [protocol] only)");
  p.command("run").description("Run a file")
    .argument("<file>", "Python file")
    .option("--timeout <seconds>", "timeout")
    .addOption(new Option("--output <format>", "result format").choices(["compact", "toon", "json"]));
  p.command("completions").addArgument(new Argument("<shell>").choices(["bash", "zsh", "fish"]));
  const image = p.command("image").description("Manage the sandbox image");
  image.command("build").description("Build it").option("--force", "rebuild");
  return p;
}

function has(command: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${command}`]).status === 0;
}

function scriptFile(shell: string, p = program()): string {
  const dir = mkdtempSync(join(tmpdir(), "codemode-completions-"));
  const file = join(dir, `codemode.${shell}`);
  writeFileSync(file, completionScript(shell, p)!);
  return file;
}

/** Runs the bash completion function for a command line and returns COMPREPLY. */
function bashComplete(file: string, words: string[]): string[] {
  const script = `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1));
    _codemode; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const out = spawnSync("bash", ["-c", script, "bash", file, ...words], { encoding: "utf8" });
  assert.equal(out.status, 0, out.stderr);
  return out.stdout.split("\n").filter(Boolean).sort();
}

Deno.test("the command tree mirrors commands, options, choices and nested subcommands", () => {
  const tree = commandTree(program());
  const byPath = new Map(tree.map((c) => [c.path.join(" "), c]));
  assert.deepEqual([...byPath.keys()], ["", "serve", "run", "completions", "image", "image build"]);
  assert.deepEqual(byPath.get("")!.subcommands.map((s) => s.name), [
    "serve",
    "run",
    "completions",
    "image",
    "help",
  ]);
  const run = byPath.get("run")!;
  assert.equal(run.positional, "files");
  assert.deepEqual(run.options.find((o) => o.long === "--output")?.choices, ["compact", "toon", "json"]);
  assert.equal(run.options.find((o) => o.long === "--timeout")?.takesValue, true);
  assert.deepEqual(byPath.get("completions")!.positional, ["bash", "zsh", "fish"]);
  assert.equal(byPath.get("image build")!.options.find((o) => o.long === "--force")?.takesValue, false);
  assert.ok(byPath.get("")!.options.some((o) => o.long === "--version" && o.short === "-V"));
});

Deno.test("an option added to the program shows up in every shell's script", () => {
  const p = program();
  p.commands.find((c) => c.name() === "serve")!.option("--brand-new-flag", "added later");
  for (const shell of ["bash", "zsh", "fish"]) {
    const script = completionScript(shell, p)!;
    assert.match(script, /brand-new-flag/, `${shell} script lacks the new option`);
  }
});

Deno.test("an unknown shell is a usage error with exit code 2", async () => {
  assert.equal(completionScript("powershell", program()), undefined);
  const write = process.stderr.write;
  let said = "";
  process.stderr.write = ((s: string) => (said += s, true)) as typeof process.stderr.write;
  try {
    assert.equal(await completions("powershell", program()), 2);
  } finally {
    process.stderr.write = write;
  }
  assert.match(said, /unknown shell "powershell"/);
});

Deno.test({
  name: "bash completes commands, nested commands, options and option choices",
  ignore: !has("bash"),
  fn() {
    const file = scriptFile("bash");
    assert.deepEqual(bashComplete(file, ["codemode", ""]), ["completions", "help", "image", "run", "serve"]);
    assert.deepEqual(bashComplete(file, ["codemode", "r"]), ["run"]);
    assert.deepEqual(bashComplete(file, ["codemode", "image", ""]), ["build", "help"]);
    assert.deepEqual(bashComplete(file, ["codemode", "image", "build", "--f"]), ["--force"]);
    assert.deepEqual(bashComplete(file, ["codemode", "run", "--output", ""]), ["compact", "json", "toon"]);
    assert.deepEqual(bashComplete(file, ["codemode", "run", "--timeout", ""]), []);
    assert.deepEqual(bashComplete(file, ["codemode", "completions", "f"]), ["fish"]);
    assert.deepEqual(bashComplete(file, ["codemode", "run", "--o"]), ["--output"]);
  },
});

Deno.test({
  name: "bash completes file names for a file argument",
  ignore: !has("bash"),
  fn() {
    const dir = mkdtempSync(join(tmpdir(), "codemode-files-"));
    writeFileSync(join(dir, "job.py"), "print(1)\n");
    assert.deepEqual(bashComplete(scriptFile("bash"), ["codemode", "run", join(dir, "jo")]), [
      join(dir, "job.py"),
    ]);
  },
});

Deno.test({
  name: "the zsh script parses",
  ignore: !has("zsh"),
  fn() {
    const out = spawnSync("zsh", ["-n", scriptFile("zsh")], { encoding: "utf8" });
    assert.equal(out.status, 0, out.stderr);
  },
});

Deno.test({
  name: "fish completes commands, nested commands and option choices",
  ignore: !has("fish"),
  fn() {
    const file = scriptFile("fish");
    const complete = (line: string) => {
      const out = spawnSync("fish", ["-c", `source ${file}; complete -C ${JSON.stringify(line)}`], {
        encoding: "utf8",
      });
      assert.equal(out.status, 0, out.stderr);
      return out.stdout.split("\n").filter(Boolean).map((l) => l.split("\t")[0]).sort();
    };
    assert.deepEqual(complete("codemode "), ["completions", "help", "image", "run", "serve"]);
    assert.deepEqual(complete("codemode image "), ["build", "help"]);
    assert.deepEqual(complete("codemode run --output "), ["compact", "json", "toon"]);
    assert.deepEqual(complete("codemode image build --f"), ["--force"]);
  },
});
