-- a snapshot, so a build has one of each kind of node dbt records (seed, model, test, snapshot)
{% snapshot customers_history %}
{{ config(unique_key='id', strategy='check', check_cols='all') }}
select * from {{ ref('stg_customers') }}
{% endsnapshot %}
