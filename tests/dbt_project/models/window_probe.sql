-- what the scheduler passed in --vars: tests read these back from the database
select '{{ var("window_low", "") }}' as window_low, '{{ var("window_high", "") }}' as window_high,
       '{{ var("run_id", "") }}' as run_id, '{{ var("region", "") }}' as region
