import { describe, expect, it } from 'vitest';
import {
  AWP_ERRORS,
  awpError,
  awpErrorByCode,
  isAwpCode,
  isReservedJsonRpcCode,
  isRetryable,
  jsonRpcError,
  JSONRPC_ERROR_CODES,
  type AwpErrorName,
} from '../../src/protocol/errors.js';
import { getValidator } from '../../src/protocol/schemas.js';

const sender = getValidator('sender');

describe('AWP error-code table', () => {
  it('lists the 22 codes of the spec with their names and default retryability', () => {
    expect(AWP_ERRORS).toHaveLength(22);
    expect(new Set(AWP_ERRORS.map((e) => e.code)).size).toBe(22);
    const retryable = AWP_ERRORS.filter((e) => e.retryable === true).map((e) => e.name);
    expect(retryable.sort()).toEqual(
      [
        'AWP_EMBODIMENT_UNAVAILABLE',
        'AWP_BUSY',
        'AWP_QUEUE_FULL',
        'AWP_ESTOP_ACTIVE',
        'AWP_STALE_INTENT',
        'AWP_APPROVAL_TIMEOUT',
      ].sort(),
    );
    expect(awpErrorByCode(2006)?.name).toBe('AWP_INTEGER_RANGE');
    expect(awpErrorByCode(4002)?.retryable).toBe('varies');
    expect(awpErrorByCode(-32600)).toBeUndefined();
    for (const e of AWP_ERRORS) expect(isAwpCode(e.code)).toBe(true);
  });

  it('keeps JSON-RPC reserved codes apart', () => {
    for (const code of Object.values(JSONRPC_ERROR_CODES)) {
      expect(isReservedJsonRpcCode(code)).toBe(true);
      expect(isAwpCode(code)).toBe(false);
    }
  });
});

describe('awpError', () => {
  it('AWP-ERR-001 always carries data.retryable and the code name as message, valid in sender form', () => {
    for (const e of AWP_ERRORS) {
      const err = awpError(e.name);
      expect(err.code).toBe(e.code);
      expect(err.message).toBe(e.name);
      expect(typeof err.data?.retryable).toBe('boolean');
      expect(sender.error(err)).toEqual({ ok: true, checked: true });
    }
  });

  it('adds detail, retry_after_ms and method-specific extras without letting extras override them', () => {
    const err = awpError('AWP_TICK_MISMATCH', { detail: 'tick is 12', extra: { tick: 12, retryable: true } });
    expect(err).toEqual({
      code: 3009,
      message: 'AWP_TICK_MISMATCH',
      data: { tick: 12, retryable: false, detail: 'tick is 12' },
    });
    expect(awpError('AWP_FORBIDDEN', 'observer sessions cannot submit').data).toEqual({
      retryable: false,
      detail: 'observer sessions cannot submit',
    });
  });

  it('AWP-ENV-004 marks a rate-limit envelope error retryable with retry_after_ms, an envelope reject not', () => {
    const rate = awpError('AWP_ENVELOPE_EXCEEDED', {
      retry_after_ms: 100,
      detail: 'max_action_rate_hz 10 exceeded',
    });
    expect(rate.data).toEqual({
      retryable: true,
      retry_after_ms: 100,
      detail: 'max_action_rate_hz 10 exceeded',
    });
    expect(awpError('AWP_ENVELOPE_EXCEEDED').data?.retryable).toBe(false);
    expect(awpError('AWP_BUSY', { retryable: false }).data?.retryable).toBe(false);
  });
});

describe('jsonRpcError and isRetryable', () => {
  it('builds reserved errors with the standard message, data only when asked', () => {
    expect(jsonRpcError('METHOD_NOT_FOUND')).toEqual({ code: -32601, message: 'Method not found' });
    expect(jsonRpcError('INVALID_PARAMS', { detail: 'embodiment_id is required' })).toEqual({
      code: -32602,
      message: 'Invalid params',
      data: { detail: 'embodiment_id is required' },
    });
    for (const key of Object.keys(JSONRPC_ERROR_CODES) as (keyof typeof JSONRPC_ERROR_CODES)[]) {
      expect(sender.error(jsonRpcError(key)).ok).toBe(true);
    }
  });

  it('AWP-ERR-001 treats reserved errors without data as non-retryable', () => {
    expect(isRetryable(jsonRpcError('INTERNAL_ERROR'))).toBe(false);
    expect(isRetryable({ code: -32603, message: 'Internal error', data: { retryable: true } })).toBe(true);
    const names: AwpErrorName[] = ['AWP_QUEUE_FULL', 'AWP_ACTION_ID_CONFLICT'];
    expect(names.map((n) => isRetryable(awpError(n)))).toEqual([true, false]);
  });
});
