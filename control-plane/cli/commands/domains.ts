// `berth domains …` answers as a person needs them: each domain's state and, until it is ACTIVE, the
// DNS records to create.
interface DomainAnswer {
  hostname: string;
  status: string;
  canonical: boolean;
  redirectSubdomain: boolean;
  target: string;
  verification: { name: string; value: string };
  failingSince: string | null;
}

function domainText(domain: DomainAnswer): string {
  const flags = [domain.canonical ? 'canonical' : '', domain.redirectSubdomain ? 'the subdomain redirects here' : '']
    .filter(Boolean)
    .join(', ');
  const head = `${domain.hostname}  ${domain.status}${flags ? `  (${flags})` : ''}`;
  const lapsing = domain.failingSince
    ? [`  its TXT record has been missing since ${domain.failingSince}: put it back, or the domain stops being served`]
    : [];
  if (domain.status === 'ACTIVE' && !domain.failingSince) return head;
  return [
    head,
    ...lapsing,
    '  DNS records to create:',
    `    ${domain.verification.name}  TXT  "${domain.verification.value}"`,
    `    ${domain.hostname}  CNAME  ${domain.target}   (for an apex name: the A/AAAA records of ${domain.target})`,
    ...(domain.status === 'PENDING' ? [`  then: berth domains verify ${domain.hostname} --site <site>`] : []),
  ].join('\n');
}

export function domainsText(answer: { domain?: DomainAnswer; domains?: DomainAnswer[] }): string {
  if (answer.domain) return domainText(answer.domain);
  if (!answer.domains?.length) return '(no domains: berth domains add <hostname> --site <site>)';
  return answer.domains.map(domainText).join('\n');
}
