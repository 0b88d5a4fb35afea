import test from 'ava';
import { countStatements } from '../control-plane/site-databases/statements.ts';

test('statements are counted past quotes, comments and trigger bodies', (t) => {
  const cases: Array<[string, number]> = [
    ['select 1', 1],
    ['select 1;', 1],
    ['select 1; select 2', 2],
    ["select ';'", 1],
    ["insert into t values ('it''s; fine')", 1],
    ['select "a;b" from t', 1],
    ['select [a;b] from t; select 2;', 2],
    ['select 1; -- x; y', 1],
    ['/* ; */ select 1', 1],
    ['', 0],
    [' ; ; ', 0],
    ['CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = 1; DELETE FROM c; END;', 1],
    ['CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = 1; END; select 1', 2],
    ['CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = CASE WHEN 1 THEN 2 ELSE 3 END; END;', 1],
    ['select case when 1 then 2 end; select 3', 2],
  ];
  for (const [sql, expected] of cases) t.is(countStatements(sql), expected, sql);
});
