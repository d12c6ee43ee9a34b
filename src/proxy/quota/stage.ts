/**
 * The quota guard on the request path (proxy/stages.ts): admission before the token is fetched and
 * anything is sent upstream, and a look at every answer head for a 429/503 `Retry-After`.
 */
import { CLIENT_GONE, type ForwardOutcome } from '../outcome.js';
import { ClientGoneError } from '../request-body.js';
import type { ExchangeView, ForwardStage, UpstreamHead } from '../stages.js';
import { mayStartCooldown } from './cooldown.js';
import type { QuotaGuard } from './guard.js';

type Guard = Pick<QuotaGuard, 'admit' | 'observe' | 'limited' | 'callerOf' | 'fieldsFor'>;

/**
 * Without a rate limit `beforeUpstream` is synchronous: it returns undefined, or throws the
 * cooldown refusal for the one error handler. With one, the request waits as its caller's
 * (callers.ts), listens for its client leaving (socket closed, h2 stream reset) and gives its
 * place up at once; its answer carries the RateLimit fields.
 */
export function quotaStage(guard: Guard): ForwardStage {
  return {
    beforeUpstream(exchange: ExchangeView): Promise<ForwardOutcome | undefined> | undefined {
      if (!guard.limited) {
        // No limit: nothing waits, only a cooldown refuses (it throws).
        void guard.admit();
        return undefined;
      }
      return waitForSlot(guard, exchange);
    },
    upstreamAnswered(exchange: ExchangeView, status: number, head: UpstreamHead) {
      // Any other answer's headers are never parsed.
      if (mayStartCooldown(status)) guard.observe(status, head.headers);
      // Under a limit the caller learns where it stands (the API's own fields are replaced).
      if (guard.limited)
        Object.assign(
          head.headers,
          guard.fieldsFor(guard.callerOf(exchange.req.headers, exchange.caller)),
        );
      return undefined;
    },
  };
}

function waitForSlot(
  guard: Guard,
  exchange: ExchangeView,
): Promise<ForwardOutcome | undefined> | undefined {
  const controller = new AbortController();
  const onClose = () => controller.abort(new ClientGoneError());
  exchange.res.once('close', onClose);
  let wait: Promise<void> | undefined;
  try {
    wait = guard.admit(controller.signal, guard.callerOf(exchange.req.headers, exchange.caller));
  } finally {
    if (wait === undefined) exchange.res.off('close', onClose);
  }
  if (wait === undefined) return undefined;
  const waitStart = exchange.trace === undefined ? 0 : Date.now();
  return wait.then(
    () => {
      exchange.res.off('close', onClose);
      exchange.trace?.wait('quota.wait', waitStart, Date.now());
      return undefined;
    },
    (err: unknown) => {
      exchange.res.off('close', onClose);
      exchange.trace?.wait('quota.wait', waitStart, Date.now(), {
        'oauth_sidecar.outcome': 'refused',
      });
      if (err instanceof ClientGoneError) return CLIENT_GONE;
      throw err;
    },
  );
}
