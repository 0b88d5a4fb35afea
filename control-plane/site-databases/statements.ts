// Counts the SQL statements in a string, so an endpoint that runs one statement can refuse several
// instead of silently running only the first. It skips quoted text and comments, and treats the body
// of CREATE TRIGGER … BEGIN … END as part of its statement.

export function countStatements(sql: string): number {
  let count = 0;
  let pending = false; // the current statement has some content
  let word = '';
  let words: string[] = [];
  let depth = 0; // inside BEGIN … END of a trigger
  let cases = 0; // inside CASE … END, whose END closes the CASE, not the trigger
  const endWord = () => {
    if (!word) return;
    const upper = word.toUpperCase();
    words.push(upper);
    if (upper === 'BEGIN' && words.includes('TRIGGER')) depth++;
    else if (upper === 'CASE') cases++;
    else if (upper === 'END' && cases > 0) cases--;
    else if (upper === 'END' && depth > 0) depth--;
    word = '';
  };
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === '-' && sql[i + 1] === '-') {
      endWord();
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end;
      continue;
    }
    if (c === '/' && sql[i + 1] === '*') {
      endWord();
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 1;
      continue;
    }
    if (c === "'" || c === '"' || c === '`' || c === '[') {
      endWord();
      const close = c === '[' ? ']' : c;
      let j = i + 1;
      while (j < sql.length) {
        if (sql[j] === close) {
          if (close !== ']' && sql[j + 1] === close)
            j += 2; // doubled quote
          else break;
        } else j++;
      }
      i = j;
      pending = true;
      continue;
    }
    if (c === ';') {
      endWord();
      if (depth > 0) continue;
      if (pending) count++;
      pending = false;
      words = [];
      cases = 0;
      continue;
    }
    if (/\s/.test(c)) {
      endWord();
      continue;
    }
    pending = true;
    if (/[A-Za-z_]/.test(c)) word += c;
    else endWord();
  }
  endWord();
  return count + (pending ? 1 : 0);
}
