import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Callers pass credentials only through `redact()`; the serializers below are
 * a second line of defence for headers that carry them (AWP-AUD-006).
 */
export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'awp-edge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'authorization',
          '*.authorization',
          'headers.authorization',
          'session_token',
          '*.session_token',
          'upstream_token',
          '*.upstream_token',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? process.stdout,
  );
}
