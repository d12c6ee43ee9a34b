import { randomUUID } from 'node:crypto';

/** DESIGN.md: an inbound id is kept only if it is 1–128 characters of `[A-Za-z0-9._-]`. */
const VALID_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

export const REQUEST_ID_HEADER = 'x-request-id';

/** The inbound id when it is acceptable (a header repeated is a comma list, so it is refused), else a new one. */
export function resolveRequestId(
  inbound: string | string[] | undefined,
  generate: () => string = randomUUID,
): string {
  return typeof inbound === 'string' && VALID_REQUEST_ID.test(inbound) ? inbound : generate();
}
