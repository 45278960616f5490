\set key random(:records + 1, 2000000000)
INSERT INTO usertable VALUES ('user' || lpad(:key::text, 10, '0'),
  md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx', md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx',
  md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx', md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx',
  md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx', md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx',
  md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx', md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx',
  md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx', md5(:key::text) || md5(:key::text) || md5(:key::text) || 'xxxx')
ON CONFLICT DO NOTHING;
