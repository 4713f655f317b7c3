/**
 * The auth-param syntax of HTTP authentication (RFC 9110 §11.2) as the "Payment" scheme uses it
 * (draft-httpauth-payment): a challenge is `Payment` followed by `name="value"` pairs, and its JSON
 * parameters (`request`, `opaque`) and the credential are base64url (no padding) of JCS text.
 */
import { canonicalize } from '../crypto/canonical-json.js';

/** RFC 9110 token characters. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export interface Challenge {
  readonly scheme: string;
  /** Parameter names lowercased (auth-param names are case-insensitive); values unescaped. */
  readonly params: Readonly<Record<string, string>>;
}

export class AuthParamError extends Error {
  override readonly name = 'AuthParamError';
}

/** A quoted-string (RFC 9110 §5.6.4): `"` and `\` escaped; characters a header cannot carry refused. */
export function quoted(value: string): string {
  // HTAB, SP, VCHAR and obs-text; anything else (CR, LF, NUL, other controls) would break the field.
  if (/[^\t\x20-\x7e\x80-\xff]/.test(value)) throw new AuthParamError('an auth-param value may hold only tab, space, visible ASCII and obs-text');
  return `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/** `Scheme name="value", ...`: every value quoted, in the order given. */
export function serializeChallenge(challenge: Challenge): string {
  if (!TOKEN.test(challenge.scheme)) throw new AuthParamError(`${JSON.stringify(challenge.scheme)} is not a token`);
  const params = Object.entries(challenge.params).map(([name, value]) => {
    if (!TOKEN.test(name)) throw new AuthParamError(`${JSON.stringify(name)} is not a token`);
    return `${name}=${quoted(value)}`;
  });
  return params.length ? `${challenge.scheme} ${params.join(', ')}` : challenge.scheme;
}

/**
 * Parses a WWW-Authenticate field value: a comma-separated list of challenges, each a scheme and its
 * auth-params (token or quoted-string values). token68 challenges are not used by any scheme pgward
 * reads and are refused. A repeated parameter name is refused, as RFC 9110 requires.
 */
export function parseChallenges(header: string): Challenge[] {
  const challenges: { scheme: string; params: Record<string, string> }[] = [];
  let at = 0;
  const skip = (pattern: RegExp) => {
    while (at < header.length && pattern.test(header[at]!)) at++;
  };
  const token = (): string => {
    const start = at;
    while (at < header.length && TOKEN.test(header[at]!)) at++;
    return header.slice(start, at);
  };
  const quotedString = (): string => {
    let value = '';
    for (at++; at < header.length; at++) {
      const c = header[at]!;
      if (c === '"') {
        at++;
        return value;
      }
      if (c === '\\') {
        at++;
        if (at >= header.length) break;
      }
      value += header[at];
    }
    throw new AuthParamError('an unterminated quoted-string');
  };
  while (at < header.length) {
    skip(/[ \t,]/);
    if (at >= header.length) break;
    const scheme = token();
    if (!scheme) throw new AuthParamError(`expected an auth-scheme at offset ${at}`);
    const challenge = { scheme, params: {} as Record<string, string> };
    challenges.push(challenge);
    // Parameters follow until the next item that is a bare token (the next challenge's scheme).
    for (;;) {
      skip(/[ \t]/);
      const itemStart = at;
      skip(/[ \t,]/);
      if (at >= header.length) break;
      const name = token();
      skip(/[ \t]/);
      if (!name || header[at] !== '=') {
        at = itemStart;
        break;
      }
      at++;
      skip(/[ \t]/);
      const value = header[at] === '"' ? quotedString() : token();
      const key = name.toLowerCase();
      if (key in challenge.params) throw new AuthParamError(`the parameter ${key} is repeated`);
      challenge.params[key] = value;
      skip(/[ \t]/);
      if (at < header.length && header[at] !== ',') throw new AuthParamError(`expected a comma at offset ${at}`);
    }
    if (at < header.length && header[at] !== ',' && !TOKEN.test(header[at]!)) throw new AuthParamError(`unexpected ${JSON.stringify(header[at])} at offset ${at}`);
  }
  return challenges;
}

/** base64url without padding of the JCS text of `value`. */
export function encodeJson(value: unknown): string {
  return Buffer.from(canonicalize(value), 'utf8').toString('base64url');
}

/** The JSON value a base64url (no padding) parameter carries; AuthParamError when it is not one. */
export function decodeJson(encoded: string): unknown {
  if (!BASE64URL.test(encoded)) throw new AuthParamError('expected base64url without padding');
  try {
    return JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    throw new AuthParamError('the base64url value is not JSON');
  }
}
