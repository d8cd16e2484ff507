-- checked by the unit test test_customers_count (models/unit_tests.yml); ETL_TEST_DBT_UNIT_FAIL=1 breaks the logic
-- on purpose, so the unit test fails and a re-run from failure can then select it by its own name
select count(*){% if env_var('ETL_TEST_DBT_UNIT_FAIL', '0') == '1' %} + 1{% endif %} as n
from {{ ref('stg_customers') }}
