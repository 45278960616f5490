-- The seed workload (scaled down; bench/ runs the full 2 x 1M rows).
create table demo (id uuid default gen_random_uuid() primary key, value float);
insert into demo(value) select random() from generate_series(1,20000);
insert into demo(value) select random() from generate_series(1,20000);
select count(*), count(distinct id), bool_and(value >= 0 and value < 1) from demo;
update demo set value = value + 1;
select count(*), bool_and(value >= 1 and value < 2) from demo;
select count(*) from demo;
delete from demo;
select count(*) from demo;
drop table demo;
