/** Command-line parsing only: argv in, a command out. No I/O (docs/reference.md "Command line"). */

export type Command = 'serve' | 'check' | 'demo' | 'standin' | 'standin-token' | 'help' | 'version';

/** What `standin token` mints: a caller token of the running stand-in. */
export interface TokenRequest {
  sub: string;
  /** Default `oauth-sidecar`. */
  aud: string | undefined;
  /** Seconds; default 3600. */
  ttlSeconds: number | undefined;
}

export interface CliArgs {
  command: Command;
  configFile: string | undefined;
  /** `check --offline`: settings and files only, no network, no secret required. */
  offline: boolean;
  /** Only for `standin-token`. */
  token?: TokenRequest;
}

export const USAGE = `usage: oauth-sidecar [serve|check|demo|standin] [--config FILE] [--offline]
       oauth-sidecar standin token --sub SUBJECT [--aud AUDIENCE] [--ttl SECONDS]

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
  standin token    print a caller token (CALLER_AUTH=jwt) of the stand-in started in this
                   directory: --sub the subject, --aud (default oauth-sidecar), --ttl (default 3600)

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
  const token: Partial<Record<TokenOption, string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') return { command: 'help', configFile, offline };
    if (arg === '--version') return { command: 'version', configFile, offline };
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? splitOption(arg) : [arg];
    if (name === '--offline' && inline === undefined) {
      offline = true;
    } else if (name === '--config' || name === '-c') {
      configFile = optionValue(name, inline, argv[i + 1], 'a file');
      if (inline === undefined) i++;
    } else if (command === 'standin-token' && isTokenOption(name)) {
      token[name] = optionValue(name, inline, argv[i + 1], 'a value');
      if (inline === undefined) i++;
    } else if (arg.startsWith('-')) {
      throw new UsageError(`unknown option ${name}`);
    } else if (command === 'standin' && arg === 'token') {
      command = 'standin-token';
    } else if (command === undefined && (COMMANDS as readonly string[]).includes(arg)) {
      command = arg as Command;
    } else {
      throw new UsageError(`unknown command ${arg}`);
    }
  }
  if (offline && command !== 'check') throw new UsageError('--offline applies to check only');
  if (command === 'standin-token') {
    return { command, configFile, offline, token: tokenRequest(token) };
  }
  return { command: command ?? 'serve', configFile, offline };
}

const TOKEN_OPTIONS = ['--sub', '--aud', '--ttl'] as const;
type TokenOption = (typeof TOKEN_OPTIONS)[number];
const isTokenOption = (name: string): name is TokenOption =>
  (TOKEN_OPTIONS as readonly string[]).includes(name);

function splitOption(arg: string): [string, string] {
  const at = arg.indexOf('=');
  return [arg.slice(0, at), arg.slice(at + 1)];
}

/** The value of an option, inline (`--x=v`) or the next argument; never empty, never an option. */
function optionValue(
  name: string,
  inline: string | undefined,
  next: string | undefined,
  what: string,
): string {
  const value = inline ?? next;
  if (value === undefined || value === '' || (inline === undefined && value.startsWith('-'))) {
    throw new UsageError(`${name} needs ${what}`);
  }
  return value;
}

function tokenRequest(options: Partial<Record<TokenOption, string>>): TokenRequest {
  const sub = options['--sub'];
  if (sub === undefined) throw new UsageError('standin token needs --sub SUBJECT');
  const ttl = options['--ttl'];
  if (ttl !== undefined && !/^[1-9][0-9]{0,8}$/.test(ttl)) {
    throw new UsageError('--ttl needs whole seconds');
  }
  return { sub, aud: options['--aud'], ttlSeconds: ttl === undefined ? undefined : Number(ttl) };
}
