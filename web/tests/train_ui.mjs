// The Train panel driven as a visitor drives it, for the training tests: its status, its script actions, and
// its controls found and clicked with the mouse.
import { mouse } from './harness.mjs';

export const train = (page) => page.evaluate(() => attnviz.status().train);
export const act = (page, c) => page.evaluate((x) => attnviz.train(x), c);

// A control's rectangle once a frame has drawn it wholly in view: the controls column is scrolled with the
// mouse wheel until it is.
export async function control(page, name) {
  for (let i = 0; i < 60; ++i) {
    const c = (await train(page)).controls[name];
    if (c && c.visible) return c;
    if (c) {
      await mouse(page, () => page.mouse.move(c.x + 4, 400));
      await mouse(page, () => page.mouse.wheel(0, c.y > 400 ? 120 : -120));
    } else {
      await mouse(page, () => page.mouse.move(20, 20 + (i % 2)));  // a frame, to draw the control
    }
  }
  throw new Error(`the Train panel's ${name} control never came into view`);
}
// A click: the pointer moved onto the control until a frame has drawn it hovered there, then pressed and
// released, each in a frame of its own (mouse()). The rectangle is the last frame's, and the panel's layout
// can change in the next (a fetch's outcome, the first view).
export async function click(page, name) {
  for (let i = 0; ; ++i) {
    const c = await control(page, name);
    await mouse(page, () => page.mouse.move(c.x + c.w / 2, c.y + c.h / 2));
    if ((await train(page)).controls[name]?.hovered) break;
    if (i === 20) throw new Error(`the Train panel's ${name} control was never hovered`);
  }
  await mouse(page, () => page.mouse.down());
  await mouse(page, () => page.mouse.up());
}
