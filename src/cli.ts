/** Command-line parsing only: argv in, a command out. No I/O (docs/reference.md "Command line"). */

export type Command = 'serve' | 'check' | 'demo' | 'standin' | 'help' | 'version';

export interface CliArgs {
  command: Command;
  configFile: string | undefined;
  /** `check --offline`: settings and files only, no network, no secret required. */
  offline: boolean;
}

export const USAGE = `usage: oauth-sidecar [serve|check|demo|standin] [--config FILE] [--offline]

commands:
  serve (default)  forward allow-listed paths upstream with a bearer token
  check            validate the configuration, get one token, print what came back (never the token)
  check --offline  validate every setting and rule, and read every file that exists (credential
                   files, CA bundle); no network, no secret required: a credential file that is
                   absent is named as not checked. Exit 78 on any problem (unknown settings
                   included), 0 otherwise: for a configuration CI
  demo             run an embedded stand-in of the API and the sidecar in front of it (no network)
  standin          run the stand-in of the API alone on 127.0.0.1:8443 (STANDIN_LISTEN), to try
                   check and serve offline; prints the variables that point the sidecar at it

options:
  --config FILE    YAML configuration; an environment variable wins over its key, but the
                   credentials have one source: CLIENT_CREDENTIALS_CSV (or CLIENT_ID...) set
                   beside credential files in the YAML is an error (exit 78), not an override
  --help, -h       this text
  --version        print the version

settings: environment variables (UPSTREAM_BASE_URL, CLIENT_CREDENTIALS_CSV, ...) or YAML keys,
every one in docs/configuration.md; config/laptop.yaml and config/example.yaml are examples.`;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

const COMMANDS: readonly Command[] = ['serve', 'check', 'demo', 'standin'];

/** Parse `argv` (without node and script). Throws UsageError with a one-line reason. */
export function parseArgs(argv: readonly string[]): CliArgs {
  let command: Command | undefined;
  let configFile: string | undefined;
  let offline = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') return { command: 'help', configFile, offline };
    if (arg === '--version') return { command: 'version', configFile, offline };
    if (arg === '--offline') {
      offline = true;
    } else if (arg === '--config' || arg === '-c') {
      const value = argv[i + 1];
      if (value === undefined || value.startsWith('-')) throw new UsageError(`${arg} needs a file`);
      configFile = value;
      i++;
    } else if (arg.startsWith('--config=')) {
      configFile = arg.slice('--config='.length);
      if (configFile === '') throw new UsageError('--config needs a file');
    } else if (arg.startsWith('-')) {
      throw new UsageError(`unknown option ${arg}`);
    } else if (command === undefined && (COMMANDS as readonly string[]).includes(arg)) {
      command = arg as Command;
    } else {
      throw new UsageError(`unknown command ${arg}`);
    }
  }
  if (offline && command !== 'check') throw new UsageError('--offline applies to check only');
  return { command: command ?? 'serve', configFile, offline };
}
