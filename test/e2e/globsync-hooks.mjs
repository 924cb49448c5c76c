// Resolve hook for globsync-shim.mjs: "fs" imported from inside node_modules
// resolves to fs-with-globsync.mjs.
const wrapper = new URL('./fs-with-globsync.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/node_modules/')) {
    return { url: wrapper, shortCircuit: true };
  }
  return next(specifier, context);
}
