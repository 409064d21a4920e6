/**
 * The skills an upstream server publishes through the MCP skills extension, read with the SDK's
 * `SkillsClient`, which checks every entry and verifies every file's size, digest and frontmatter against
 * it. One per server session; the listing is kept until the server says its resources changed.
 * @module
 */
import type { Client } from "@modelcontextprotocol/client";
import { type Skill, SkillsClient } from "@modelcontextprotocol/client/ext/skills";

/** One file of an upstream skill, verified. */
export interface UpstreamSkillFile {
  uri: string;
  text?: string;
  bytes: Uint8Array;
}

/** The skills of one connected server. */
export class UpstreamSkills {
  readonly #client: SkillsClient;
  #listing?: Promise<Skill[]>;

  /** Skills of the server `client` is connected to. */
  constructor(client: Client) {
    // One invalid entry must not hide the server's other skills.
    this.#client = new SkillsClient(client, { skipInvalid: true });
  }

  /** Whether the server declared the skills extension. */
  get supported(): boolean {
    return this.#client.supported;
  }

  /** The server's skills (every page); none when it does not declare the extension. */
  list(timeout: number): Promise<Skill[]> {
    if (!this.supported) return Promise.resolve([]);
    this.#listing ??= this.#client.list({}, { timeout }).then((listing) => listing.skills);
    this.#listing.catch(() => (this.#listing = undefined));
    return this.#listing;
  }

  /** Forgets the listing (the server's resources changed). */
  forget(): void {
    this.#listing = undefined;
  }

  /** One file of the skill called `name` (`SKILL.md` by default), verified against the server's entry. */
  async read(name: string, file: string | undefined, timeout: number): Promise<UpstreamSkillFile> {
    const skill = (await this.list(timeout)).find((s) => s.frontmatter.name === name);
    if (!skill) throw new RangeError(`publishes no skill "${name}"`);
    const read = await this.#client.read(skill, file, { timeout });
    return { uri: read.uri, text: read.text, bytes: read.bytes };
  }

  /** The paths of a skill's files relative to its folder (`SKILL.md`, `skill.py`, ...). */
  async files(name: string, timeout: number): Promise<string[]> {
    const skill = (await this.list(timeout)).find((s) => s.frontmatter.name === name);
    if (!skill || skill.resources === "dynamic") return [];
    const root = skill.uri.slice(0, skill.uri.lastIndexOf("/") + 1);
    return skill.resources.filter((r) => r.uri.startsWith(root)).map((r) =>
      decodeURIComponent(r.uri.slice(root.length))
    );
  }
}
