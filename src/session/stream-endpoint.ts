/** A world's `stream_endpoints` entry, as the world sent it (AWP-TRN-004). */
export interface StreamEndpoint {
  binding: string;
  url?: string;
  channels?: number[];
  max_frame_bytes?: number;
  [key: string]: unknown;
}
