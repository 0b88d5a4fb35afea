// The few HTML pages the hosting layer writes itself: not found, and the private-site gate and refusal.

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, message: string, link?: { href: string; text: string }): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}h1{font-size:1.5rem}p{color:#555}</style></head>
<body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>${link ? `<p><a href="${escapeHtml(link.href)}">${escapeHtml(link.text)}</a></p>` : ''}</body>
</html>
`;
}

export const noSitePage = page('Site not found', 'There is no site at this address.');
export const notFoundPage = page('Page not found', 'The page you asked for does not exist on this site.');
/** The gate of a PRIVATE site, linking to the control plane's sign-in for it. */
export const privateSitePage = (signIn: string) => page('This site is private', 'Sign in with an account of this site’s owner to view it.', { href: signIn, text: 'Sign in' });
export const notMemberPage = page('Not your site', 'You are signed in, but not as a member of the account that owns this site.', { href: '/_berth/logout', text: 'Sign out of this site' });
export const badRequestPage = page('Bad request', 'The address of this request is not valid.');
export const linkExpiredPage = page('Sign in again', 'This sign-in link was used already, has expired, or is for another site.');
