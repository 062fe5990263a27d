import { MemorySessionStore } from '../../src/store/memory-store.js';
import { sessionStoreContract } from './contract.js';

sessionStoreContract('MemorySessionStore', () => {
  const store = new MemorySessionStore();
  return Promise.resolve({ store, dispose: () => store.close() });
});
