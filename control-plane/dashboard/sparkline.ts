// A small line of a series (a site's requests by the hour on the sites list): an SVG polyline scaled to
// its largest value, its numbers in its title for screen readers.

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 120;
const HEIGHT = 28;

/** `values` as a line; `title` says what they are. */
export function sparkline(values: number[], title: string): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${WIDTH} ${HEIGHT}`);
  svg.setAttribute('width', String(WIDTH));
  svg.setAttribute('height', String(HEIGHT));
  svg.setAttribute('class', 'sparkline');
  svg.setAttribute('role', 'img');
  const titleEl = document.createElementNS(SVG, 'title');
  titleEl.textContent = `${title}: ${values.join(', ')}`;
  svg.appendChild(titleEl);
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? WIDTH / (values.length - 1) : WIDTH;
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute(
    'points',
    values.map((v, i) => `${(i * step).toFixed(1)},${(HEIGHT - 2 - (v / max) * (HEIGHT - 4)).toFixed(1)}`).join(' '),
  );
  svg.appendChild(line);
  return svg;
}
