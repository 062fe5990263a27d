/**
 * A focused, offline Dockerfile linter for deploy/Dockerfile (hadolint and dockerfilelint are not
 * available here). It parses instructions (continuation lines joined, comments dropped, global ARG
 * defaults substituted into FROM) and checks the rules below; each problem starts with its rule id.
 *
 *   pinned-base      every FROM names an earlier stage, or an image with a digest or a full x.y.z tag
 *   glibc-base       the runtime base is Node 24 on Debian trixie/forky (glibc >= 2.38 for uWebSockets.js)
 *   non-root         the final stage sets USER to a numeric non-zero uid before ENTRYPOINT/CMD
 *   healthcheck      the final stage has a HEALTHCHECK that uses node (no curl/wget) on http://127.0.0.1:<admin>/healthz
 *   expose           EXPOSE lists exactly the agent and admin ports
 *   no-remote-add    no ADD of a URL (use a verified download in a RUN step, or COPY)
 *   no-secret-env    no ENV/ARG whose name or value looks like a credential
 *   npm-ci           npm installs use `npm ci`, never `npm install`/`npm i`/`npm add`
 *   prod-deps        the final stage's node_modules come from a stage that ran `npm ci --omit=dev`
 *   exec-form        ENTRYPOINT and CMD are JSON arrays (SIGTERM reaches node, which drains), running the
 *                    package's bin with `serve --config <config path>`
 *   copy-context     every COPY source from the build context exists and .dockerignore admits it
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

export interface LintContext {
  readonly repo: string;
  readonly agentPort: number;
  readonly adminPort: number;
  /** package.json `bin` target, e.g. dist/cli/awp-edge.js. */
  readonly bin: string;
  /** Where the Deployment mounts edge.yaml. */
  readonly configPath: string;
  readonly dockerignore: string;
}

export function parseDockerfile(text: string): { globalArgs: Map<string, string>; stages: Stage[] } {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.trimEnd().endsWith('\\') && i + 1 < lines.length) {
      line = line.trimEnd().slice(0, -1) + ' ';
      i++;
      if (!/^\s*#/.test(lines[i]!)) line += lines[i]!.trim();
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m) instructions.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1 });
  }
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      const image = (m?.[1] ?? ins.args).replace(/\$\{?(\w+)\}?/g, (_, n: string) => globalArgs.get(n) ?? '');
      stages.push({ image, name: m?.[2], instructions: [] });
    } else if (stages.length === 0 && ins.keyword === 'ARG') {
      const [name, value] = ins.args.split('=', 2);
      globalArgs.set(name!.trim(), (value ?? '').trim());
    } else {
      stages.at(-1)?.instructions.push(ins);
    }
  }
  return { globalArgs, stages };
}

function jsonArray(args: string): string[] | undefined {
  try {
    const v = JSON.parse(args) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined;
  } catch {
    return undefined;
  }
}

/** .dockerignore with the allowlist style `**` then `!path` lines: the last matching line decides. */
function admitted(dockerignore: string, path: string): boolean {
  let included = true;
  for (const raw of dockerignore.split('\n')) {
    const rule = raw.trim();
    if (rule === '' || rule.startsWith('#')) continue;
    const negate = rule.startsWith('!');
    const pattern = negate ? rule.slice(1) : rule;
    const base = pattern.replace(/\/\*\*$/, '');
    const hit = pattern === '**' || path === base || path.startsWith(`${base}/`);
    if (hit) included = negate;
  }
  return included;
}

export function lintDockerfile(text: string, ctx: LintContext): string[] {
  const problems: string[] = [];
  const { globalArgs, stages } = parseDockerfile(text);
  const final = stages.at(-1);
  if (final === undefined) return ['parse: no FROM'];
  const names = new Set<string>();
  const all = [...globalArgs.entries()].map(([k, v]) => ({ keyword: 'ARG', args: `${k}=${v}`, line: 0 }));

  for (const stage of stages) {
    all.push(...stage.instructions);
    if (!names.has(stage.image)) {
      const digest = /@sha256:[0-9a-f]{64}$/.test(stage.image);
      const tag = /^[^@]+:(\d+\.\d+\.\d+)(-[\w.-]+)?(@sha256:[0-9a-f]{64})?$/.exec(stage.image);
      if (!digest && tag === null)
        problems.push(`pinned-base: FROM ${stage.image} has neither a digest nor an x.y.z tag`);
    }
    if (stage.name !== undefined) names.add(stage.name);
  }

  if (!/^node:24\.\d+\.\d+-(trixie|forky)(-slim)?(@sha256:[0-9a-f]{64})?$/.test(final.image)) {
    problems.push(
      `glibc-base: runtime base ${final.image} is not Node 24 on Debian trixie/forky (glibc >= 2.38)`,
    );
  }

  const fin = final.instructions;
  const userIdx = fin.findLastIndex((i) => i.keyword === 'USER');
  const startIdx = fin.findIndex((i) => i.keyword === 'ENTRYPOINT' || i.keyword === 'CMD');
  const user = userIdx >= 0 ? fin[userIdx]!.args : 'root';
  if (!/^[1-9]\d*(:\d+)?$/.test(user) || (startIdx >= 0 && userIdx > startIdx)) {
    problems.push(
      `non-root: final stage USER is ${JSON.stringify(user)} (want a numeric non-zero uid before ENTRYPOINT/CMD)`,
    );
  }

  const health = fin.find((i) => i.keyword === 'HEALTHCHECK');
  if (health === undefined || /^NONE$/i.test(health.args)) {
    problems.push('healthcheck: the final stage has no HEALTHCHECK');
  } else {
    const cmd = /\bCMD\s+(.*)$/.exec(health.args)?.[1] ?? '';
    const argv = jsonArray(cmd);
    if (argv?.[0] !== 'node')
      problems.push(
        'healthcheck: HEALTHCHECK CMD must run node in exec form (slim images have no curl/wget)',
      );
    if (!cmd.includes(`http://127.0.0.1:${ctx.adminPort}/healthz`)) {
      problems.push(`healthcheck: HEALTHCHECK does not ask http://127.0.0.1:${ctx.adminPort}/healthz`);
    }
  }

  const exposed = fin
    .filter((i) => i.keyword === 'EXPOSE')
    .flatMap((i) => i.args.split(/\s+/))
    .map((p) => Number(p.replace(/\/tcp$/, '')))
    .sort((a, b) => a - b);
  const wantPorts = [ctx.agentPort, ctx.adminPort].sort((a, b) => a - b);
  if (JSON.stringify(exposed) !== JSON.stringify(wantPorts)) {
    problems.push(`expose: EXPOSE ${exposed.join(' ')} (want ${wantPorts.join(' ')})`);
  }

  for (const ins of all) {
    if (ins.keyword === 'ADD' && /(^|\s)(https?:\/\/|git@|ftp:\/\/)/.test(ins.args)) {
      problems.push(`no-remote-add: line ${ins.line}: ADD of a URL`);
    }
    if (ins.keyword === 'ENV' || ins.keyword === 'ARG') {
      for (const part of ins.args.split(/\s+(?=\w+=)/)) {
        const [name, value = ''] = part.split('=', 2);
        if (/(token|secret|passw|credential|api_?key|private_?key|auth)/i.test(name!)) {
          problems.push(`no-secret-env: line ${ins.line}: ${ins.keyword} ${name} looks like a credential`);
        } else if (/(:\/\/[^/\s]*:[^@\s]+@)|^(ghp_|glpat-|xox[bp]-|AKIA)/.test(value)) {
          problems.push(`no-secret-env: line ${ins.line}: ${ins.keyword} ${name} carries a credential`);
        }
      }
    }
    if (ins.keyword === 'RUN' && /\bnpm\s+(install|i|add|isntall)\b/.test(ins.args)) {
      problems.push(
        `npm-ci: line ${ins.line}: use npm ci (reproducible from package-lock.json), not npm install`,
      );
    }
  }

  const modules = fin.find((i) => i.keyword === 'COPY' && /node_modules/.test(i.args));
  const from = modules !== undefined ? /--from=(\S+)/.exec(modules.args)?.[1] : undefined;
  const depsStage = stages.find((s) => s.name === from);
  if (
    depsStage === undefined ||
    !depsStage.instructions.some((i) => i.keyword === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args))
  ) {
    problems.push(
      'prod-deps: the final stage must copy node_modules from a stage that ran `npm ci --omit=dev`',
    );
  }

  const entry = fin.find((i) => i.keyword === 'ENTRYPOINT');
  const cmd = fin.find((i) => i.keyword === 'CMD');
  const entryArgv = entry !== undefined ? jsonArray(entry.args) : undefined;
  const cmdArgv = cmd !== undefined ? jsonArray(cmd.args) : undefined;
  if (entryArgv === undefined || cmdArgv === undefined) {
    problems.push('exec-form: ENTRYPOINT and CMD must both be JSON arrays');
  } else {
    const workdir = fin.findLast((i) => i.keyword === 'WORKDIR')?.args ?? '/';
    if (entryArgv[0] !== 'node' || entryArgv[1] !== join(workdir, ctx.bin)) {
      problems.push(
        `exec-form: ENTRYPOINT ${JSON.stringify(entryArgv)} does not run node ${join(workdir, ctx.bin)}`,
      );
    }
    if (JSON.stringify(cmdArgv) !== JSON.stringify(['serve', '--config', ctx.configPath])) {
      problems.push(`exec-form: CMD ${JSON.stringify(cmdArgv)} is not serve --config ${ctx.configPath}`);
    }
  }

  for (const stage of stages) {
    for (const ins of stage.instructions) {
      if (ins.keyword !== 'COPY' || ins.args.includes('--from=')) continue;
      const parts = ins.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        if (!existsSync(join(ctx.repo, src)))
          problems.push(`copy-context: line ${ins.line}: ${src} does not exist`);
        else if (!admitted(ctx.dockerignore, src.replace(/\/$/, ''))) {
          problems.push(`copy-context: line ${ins.line}: .dockerignore excludes ${src}`);
        }
      }
    }
  }
  return problems;
}
