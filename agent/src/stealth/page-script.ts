/**
 * Runs in every frame's main world before the page's scripts (see ../stealth.ts). Kept as
 * plain ES2020 text, not compiled TypeScript, so exactly this reaches the page.
 *
 * Replaced functions are Proxies of the originals, and Function.prototype.toString is
 * taught to print the original for them, so `getParameter.toString()` still reads
 * "function getParameter() { [native code] }" and the property descriptors keep their
 * native shape (a common check of detection scripts).
 */
export const STEALTH_PAGE_SCRIPT = String.raw`(() => {
  'use strict';
  const originals = new WeakMap();
  const disguise = (replacement, original) => {
    originals.set(replacement, original);
    return replacement;
  };
  const replaceMethod = (owner, name, apply) => {
    const descriptor = Object.getOwnPropertyDescriptor(owner, name);
    if (!descriptor || typeof descriptor.value !== 'function') return;
    const original = descriptor.value;
    Object.defineProperty(owner, name, { ...descriptor, value: disguise(new Proxy(original, { apply: (target, self, args) => apply(target, self, args) }), original) });
  };

  // WebGL: SwiftShader (software) gives a headless browser away; report a common Linux GPU.
  const UNMASKED_VENDOR = 0x9245;
  const UNMASKED_RENDERER = 0x9246;
  const fakeGpu = (target, self, args) => {
    if (args[0] === UNMASKED_VENDOR) return 'Google Inc. (Intel)';
    if (args[0] === UNMASKED_RENDERER) return 'ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)';
    return Reflect.apply(target, self, args);
  };
  for (const context of [self.WebGLRenderingContext, self.WebGL2RenderingContext]) {
    if (context) replaceMethod(context.prototype, 'getParameter', fakeGpu);
  }

  // permissions.query('notifications') must agree with Notification.permission.
  if (self.Permissions && self.Notification) {
    replaceMethod(Permissions.prototype, 'query', (target, self_, args) => {
      const descriptor = args[0];
      if (descriptor && descriptor.name === 'notifications') {
        const state = Notification.permission === 'default' ? 'prompt' : Notification.permission;
        return Reflect.apply(target, self_, args).then((status) => {
          if (status.state === state) return status;
          Object.defineProperty(status, 'state', { get: () => state, configurable: true });
          return status;
        });
      }
      return Reflect.apply(target, self_, args);
    });
  }

  replaceMethod(Function.prototype, 'toString', (target, self_, args) => Reflect.apply(target, originals.get(self_) ?? self_, args));
})();
`;
