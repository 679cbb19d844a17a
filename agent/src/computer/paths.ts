/** Pointer paths: straight steps for drags, cubic Bezier curves for human-looking moves. */

export type Point = [number, number];

export function linearPath(from: Point, to: Point, steps: number): Point[] {
  return Array.from({ length: steps }, (_, index) => {
    const t = (index + 1) / steps;
    return [Math.round(from[0] + (to[0] - from[0]) * t), Math.round(from[1] + (to[1] - from[1]) * t)];
  });
}

/**
 * A cubic Bezier from `from` to `to` whose control points sit off the straight line by
 * up to a third of its length, so each move bends a little differently; ends exactly on `to`.
 */
export function bezierPath(from: Point, to: Point, steps: number, random: () => number = Math.random): Point[] {
  const [dx, dy] = [to[0] - from[0], to[1] - from[1]];
  const length = Math.hypot(dx, dy);
  const normal: Point = length === 0 ? [0, 0] : [-dy / length, dx / length];
  const control = (along: number): Point => {
    const offset = (random() - 0.5) * (length / 1.5);
    return [from[0] + dx * along + normal[0] * offset, from[1] + dy * along + normal[1] * offset];
  };
  const [c1, c2] = [control(0.25 + random() * 0.2), control(0.55 + random() * 0.2)];
  return Array.from({ length: steps }, (_, index) => {
    const t = (index + 1) / steps;
    const u = 1 - t;
    const at = (axis: 0 | 1) => u * u * u * from[axis] + 3 * u * u * t * c1[axis] + 3 * u * t * t * c2[axis] + t * t * t * to[axis];
    return [Math.round(at(0)), Math.round(at(1))];
  });
}

/** xdotool commands walking the pointer along `points`, pausing `stepMs` after each. */
export function walk(points: Point[], stepMs: number): string[] {
  return points.flatMap(([x, y]) => ['mousemove', String(x), String(y), ...(stepMs > 0 ? ['sleep', seconds(stepMs)] : [])]);
}

export const seconds = (ms: number) => (ms / 1000).toFixed(3);
