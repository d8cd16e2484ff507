-- depends_on: {{ ref('stg_customers') }}
-- fails on purpose while the environment says so (ETL_TEST_DBT_FAIL=1), so a re-run from failure can then succeed
{% if env_var('ETL_TEST_DBT_FAIL', '0') == '1' %}
select id from a_table_that_does_not_exist
{% else %}
select id from {{ ref('stg_customers') }}
{% endif %}
